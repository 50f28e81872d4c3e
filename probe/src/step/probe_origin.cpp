// Probe::Impl's answer to "where was the NaN born, and why" (DESIGN §2.1): the closure form's
// step, its re-run handed to ClosureRerun, and the cause of each unsafe step.
#include <cmath>
#include <utility>

#include "probe_impl.hpp"

namespace keel::probe {

StepOutcome Probe::Impl::step(const LossClosure& closure) {
  // Counted as the probe's time on the training thread, with the step's own.
  const auto start = Clock::now();
  rerun_.prepare(*model_, layers_.params(), events_, step_);
  timing_.add_outside_step(micros(Clock::now() - start));
  const torch::Tensor loss = closure();   // the user's exceptions are theirs
  const ClosureRerun::Taking taking(rerun_, closure);
  return step(loss);
}

void Probe::Impl::trace_origin_if_due(const Reduction& r, const StepOutcome& outcome) {
  ClosureRerun::Verdict verdict;
  verdict.measured = r.stats_ok;
  verdict.sharded = static_cast<bool>(skip_agreement_);
  verdict.health = &decision_.health();
  verdict.loss_is_the_jobs = loss_is_the_jobs();
  verdict.scaler_found_inf = r.scaler_found_inf;
  verdict.loss = r.loss;
  verdict.nonfinite_last_step = decision_.blown_up_last_step();
  verdict.applied = outcome.applied;
  rerun_.trace_if_due(verdict, ClosureRerun::Model{layers_.names(), layers_.params(), buffers_}, events_, record_step_);
}

void Probe::Impl::classify(const StepPlan& plan, const Reduction& r) {
  cause_of_step_.begin(record_step_, record_.message().lr);
  if (!r.stats_ok) return;
  StepEvidence e;
  e.step = record_step_;
  const StepHealth& health = decision_.health();
  e.health = &health;
  e.loss = r.loss;
  e.has_loss = !std::isnan(r.loss) || health.loss_nonfinite;
  e.grads = &layers_.reducer().grad_stats();
  e.names = &layers_.names();
  const LayerReducer& reducer = layers_.reducer();
  if (plan.param_due && reducer.param_sumsq().size() == layers_.names().size()) e.weight_sumsq = &reducer.param_sumsq();
  e.scaler_overflow = r.scaler_found_inf;
  e.scale = r.scale > 0 ? r.scale : (scaler_ ? scaler_->scale_value() : 0.0);
  const SpikeVerdict& spike = decision_.spike();
  e.spike = spike.spike && std::isfinite(spike.z);
  e.spike_z = spike.z;
  e.spike_window = spike.compared_with;
  e.origin = rerun_.origin();
  e.not_traced = rerun_.not_traced();
  cause_of_step_.classify(std::move(e));
}

}  // namespace keel::probe
