// Probe::Impl's deferred step (DESIGN §8): on one CUDA device with AdamW, Adam or SGD, the
// skip is decided on the device (the gradient pass's verdict, read by ATen's fused optimizer
// kernel) and the step is recorded when the next one begins, so the training thread never
// waits for the GPU. Whether a step can be deferred, the step itself, and its settling.
#include <algorithm>
#include <limits>
#include <string>

#include "probe_impl.hpp"
#include "reduce/gradient_slot.hpp"

namespace keel::probe {

int Probe::Impl::deferrable_device(const StepPlan& plan, const torch::Tensor& loss) const {
  // A model the layers could not follow fails on the host path, safely (reduce()).
  if (!plan.grads_due || !layers_.error().empty()) return -1;
  // A layout planned on the CPU, its tensors left to the host's gradient walk: a model moved
  // to a GPU since is found there and planned again, and its next step may be deferred.
  if (layers_.tensors_left_to_walk()) return -1;
  // A sharded job's ranks agree on the verdict on the host, before the update (DESIGN §9).
  if (skip_agreement_) return -1;
  // Still decided on the host: a scaler whose scale is not on the device (its scale() has not
  // seen a loss there) or that the caller already unscaled (its verdict is on the host), a
  // dump that must precede an update nothing skips, and a dump asked for by command.
  const bool scaler_active = scaler_ != nullptr && scaler_->enabled();
  if (scaler_active && (scaler_->unscaled() || scaler_out_of_step_)) return -1;
  if (options_.dump_on_nonfinite && !options_.skip_on_nonfinite) return -1;
  if (control_.dump_requested()) return -1;
  // Weight norms without the update pass take a pass of their own, which waits; and the one
  // update pass, enqueued after the step, measures only layers it rebuilds on the device (a
  // layer another backend takes, frozen ones included, needs its snapshot before the step).
  if (plan.param_due && !plan.update_due) return -1;
  if (plan.update_due && !layers_.reducer().device_rebuilds_every_update()) return -1;
  int device = -1;
  for (const auto& p : layers_.params()) {
    const GradientSlot slot = gradient_slot(p);
    if (!slot.has_grad()) continue;
    const torch::Tensor& g = *slot.grad;
    if (!device_pass_accepts(g) || !device_pass_accepts(p) || g.device() != p.device()) return -1;
    const int index = g.device().index();
    if (device != -1 && index != device) return -1;
    device = index;
  }
  if (device < 0) return -1;
  if (loss.defined() && loss.numel() == 1 && !(loss.is_cuda() && loss.device().index() == device)) return -1;
  if (scaler_active && !scaler_->on_device(torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(device)))) return -1;
  std::string why;
  if ((options_.skip_on_nonfinite || options_.skip_on_spike || scaler_active) &&
      !optimizer_->supports_deferred_step(torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(device)), why)) {
    return -1;
  }
  return device;
}

void Probe::Impl::deferred_step(const torch::Tensor& loss, const StepPlan& plan, uint64_t grad_passes_before,
                                StepOutcome& outcome, StepTimes& times) {
  PendingStep p;
  p.step = step_;
  rerun_.not_run_again_deferred();
  p.plan = plan;
  p.times = times;
  read_lrs(*optimizer_, p.lr, p.group_lrs);
  p.command_skip = control_.skips(step_);
  bool stepped = p.command_skip;
  bool in_user_step = false;   // the user's optimizer's own exceptions are theirs: they propagate
  if (scaler_ != nullptr && scaler_->enabled()) p.scaler = scaler_;
  try {
    const auto reduce_start = Clock::now();
    // The scale the loss was scaled with: the device's, which the host's equals once the last
    // deferred step settled (step() settles it before this one begins).
    layers_.reducer().enqueue_grads(p.scaler ? p.scaler->inv_scale_value() : 1.0f);
    classify_layers(p.plan, layers_, grad_passes_before);
    p.has_loss = loss.defined() && loss.numel() == 1;
    // The verdict asks what the host's policies would (decide()): a non-finite gradient value
    // for the scaler; non-finite values, a non-finite loss (with one rank:
    // StepHealth::unsafe_to_apply) and an fp32 overflow for skip_on_nonfinite; the spike
    // rule's bound, from the window as it stands after the last step, for skip_on_spike
    // (non-finite values and an overflow are spikes to it too).
    p.skip_nonfinite = options_.skip_on_nonfinite;
    VerdictRequest verdict;
    verdict.max_sumsq = std::numeric_limits<double>::infinity();
    if (options_.skip_on_nonfinite || options_.skip_on_spike) verdict.max_sumsq = std::numeric_limits<float>::max();
    if (options_.skip_on_spike) {
      const double bound = decision_.spike_bound_norm();
      verdict.max_sumsq = std::min(verdict.max_sumsq, bound * bound);
    }
    if (p.has_loss) {
      loss_.start(loss, /*piggyback=*/true);
      if (p.skip_nonfinite && loss_is_the_jobs()) verdict.loss = loss.detach().to(torch::kFloat).reshape({1});
    }
    // The scaler's update follows its overflow even when a command skips the step, as on the host.
    if (p.scaler) {
      GradScaler* scaler = p.scaler;
      verdict.after_verdict = [scaler](const torch::Tensor& nonfinite) { scaler->enqueue_device_update(nonfinite); };
    }
    p.verdict = (options_.skip_on_nonfinite || options_.skip_on_spike || p.scaler) && !p.command_skip;
    layers_.reducer().finish_grads(p.verdict || p.scaler ? &verdict : nullptr);
    p.reduce_us = micros(Clock::now() - reduce_start);
    times.optimizer_start = Clock::now();
    snapshots_.order_before_update();
    if (!p.command_skip) {
      if (p.verdict) {
        try {
          optimizer_->deferred_step(layers_.reducer().found_inf());
        } catch (const std::exception&) {
          // Refused or taken back before anything was enqueued: libtorch's own step (below)
          // is the whole step. Enqueued in part (a broken device): the verdict settles it.
          stepped = optimizer_->deferred_step_enqueued();
          throw;
        }
      } else {
        in_user_step = true;
        optimizer_->step();
        in_user_step = false;
      }
      stepped = true;
    }
    times.optimizer_end = Clock::now();
    if (plan.update_due && !p.command_skip) {
      const auto update_start = Clock::now();
      layers_.reducer().enqueue_updates();
      p.updates = true;
      p.reduce_us += micros(Clock::now() - update_start);
    }
    p.watches = watches_.take();
    p.times = times;
    pending_ = std::move(p);
    outcome.applied = !pending_->command_skip;
    outcome.skip_reason = pending_->command_skip ? "command" : "";
    outcome.settled = !pending_->verdict;
  } catch (const std::exception& e) {
    if (in_user_step) throw;
    recover_deferred_step(e, p, stepped, plan, grad_passes_before, outcome, times);
  }
}

void Probe::Impl::recover_deferred_step(const std::exception& e, PendingStep& p, bool stepped, const StepPlan& plan,
                                        uint64_t grad_passes_before, StepOutcome& outcome, StepTimes& times) {
  // The probe's own failure must not change training, and this step is recorded with
  // nothing measured. Without a scaler the update is applied as libtorch would. With one,
  // the gradients may still be scaled (or half unscaled): the step ends as an overflow,
  // skipped, the scale backed off. A fused step already taken counted its steps before its
  // verdict, and a scaler's update may be on its way: both are read now (a wait, on this
  // rare path).
  pending_.reset();
  std::string consequence;
  if (stepped && p.verdict) {
    try {
      layers_.reducer().collect_grads();
      const bool applied = layers_.reducer().collected_found_inf() == 0.0f;
      optimizer_->settle_deferred_step(applied);
      const bool scaler_overflow = p.scaler && p.scaler->settle_device_update();
      outcome.applied = applied;
      outcome.skip_reason = applied ? "" : scaler_overflow ? "scaler" : "nonfinite";
      consequence = applied ? "update applied (the device found it safe)" : "update skipped by the device's verdict";
    } catch (const std::exception& again) {
      if (p.scaler) scaler_out_of_step_ = true;
      consequence = std::string("the device's verdict could not be read either (") + again.what() + ")";
    }
  } else if (p.scaler) {
    // The host's overflow update also overwrites whatever the device's had begun.
    p.scaler->mark_probe_failed();
    p.scaler->update();
    if (!stepped) {
      outcome.applied = false;
      outcome.skip_reason = "scaler";
    }
  } else if (!stepped) {
    optimizer_->step();
  }
  if (p.command_skip) {
    outcome.applied = false;
    outcome.skip_reason = "command";
  }
  times.optimizer_end = Clock::now();
  report_probe_error("the deferred step", e.what(),
                     consequence.empty() ? StepDecision::consequence_of(outcome) : consequence);
  try {
    watches_.take();   // this step's watches are not read
  } catch (const std::exception&) {
  }
  Reduction failed;
  failed.stats_ok = false;
  failed.lost_mask = plan.mask;
  failed.scaler_found_inf = p.scaler && p.scaler->found_inf();
  std::vector<wire::WatchStats> none;
  buffers_.collect(events_, record_step_);   // enqueued before this step's passes, so not lost with them
  classify_layers(p.plan, layers_, grad_passes_before);
  record(p.plan, failed, outcome, times, &none);
  last_settled_ = outcome;
}

void Probe::Impl::settle_pending() {
  if (!pending_) return;
  PendingStep p = std::move(*pending_);
  pending_.reset();
  const int64_t current_step = record_step_;
  record_step_ = p.step;
  StepOutcome outcome;
  outcome.step = p.step;
  Reduction r;
  r.reduce_us = p.reduce_us;
  r.lr = p.lr;
  r.group_lrs = std::move(p.group_lrs);
  bool scaler_settled = false;
  bool decided = false;
  try {
    layers_.reducer().collect_grads();
    // First: the next step's loss is already scaled by the device's scale, which the host
    // must know before it unscales that step.
    if (p.scaler) {
      r.scaler_found_inf = p.scaler->settle_device_update();
      scaler_settled = true;
    }
    if (p.has_loss) r.loss = loss_.value();
    // Backward order is this step's (its backward has run): the layer named is the first in
    // the order the layers' gradients arrive, which does not change from step to step.
    decision_.judge(r.loss, p.has_loss, layers_.reducer().grad_stats(),
                    [this](size_t layer) { return layers_.order().position(layer); }, outcome);
    const bool device_skipped = p.verdict && layers_.reducer().collected_found_inf() != 0.0f;
    if (p.verdict) optimizer_->settle_deferred_step(!device_skipped);
    const bool scaler_overflow = r.scaler_found_inf;
    outcome.applied = !p.command_skip && !device_skipped;
    const bool nonfinite_skip = p.skip_nonfinite && decision_.health().unsafe_to_apply(loss_is_the_jobs());
    outcome.skip_reason = p.command_skip      ? "command"
                          : !device_skipped   ? ""
                          : scaler_overflow   ? "scaler"
                          : nonfinite_skip    ? "nonfinite"
                                              : "spike";
    decided = true;
    // As on the host (reduce()): the scaler's overflow is its business, not a spike.
    decision_.judge_spike(!scaler_overflow);
    try {
      if (p.updates) {
        layers_.reducer().collect_updates(outcome.applied);
      } else if (p.plan.update_due) {
        layers_.reducer().keep_snapshot();
      }
    } catch (const std::exception& e) {
      lose_update_metrics(r, e);
    }
    // The dump of a blown-up step, a step late: the device skipped its update, so the
    // weights and the optimizer state are still the ones its gradients were computed on. An
    // update that was applied (the dump policy turned on by a command after this step was
    // enqueued with the skip off) has moved them: no dump of this step, which would hold the
    // state after it under its name.
    // A dump asked for by command waits for the step that takes it (it holds that step's state).
    if (!outcome.applied) dump_if_due(Reduction{}, /*take_requested=*/false);
  } catch (const std::exception& e) {
    r.stats_ok = false;
    r.lost_mask = p.plan.mask;
    // The device's scale was not read: the step being taken was scaled by a value the host
    // does not know, so it ends as an overflow (the host's backoff then rewrites the device's).
    if (p.scaler && !scaler_settled) scaler_out_of_step_ = true;
    if (!decided) {
      outcome.applied = !p.command_skip;
      outcome.skip_reason = p.command_skip ? "command" : "";
    }
    report_probe_error("settling the deferred step", e.what(),
                       decided ? "nothing measured this step"
                               : "nothing measured, and whether the device skipped the update is unknown");
  }
  std::vector<wire::WatchStats> watched;
  if (r.stats_ok) {
    try {
      watches_.collect(p.watches, watched);
    } catch (const std::exception& e) {
      report_probe_error("reading the watched tensors", e.what(), "not measured this step");
      watched.clear();
    }
  }
  buffers_.collect(events_, record_step_);
  const bool buffers_start = buffers_.turn_nonfinite();
  record(p.plan, r, outcome, p.times, &watched);
  last_settled_ = outcome;
  // Buffers that turned non-finite in this step's forward pass are not the device verdict's
  // business (a skip cannot undo them), so the update went ahead: the dump holds the model as
  // the next step begins, under that step's number.
  if (buffers_start) {
    record_step_ = step_;
    Reduction buffers_only;
    buffers_only.stats_ok = false;
    dump_if_due(buffers_only, /*take_requested=*/false, /*buffers_start=*/true);
  }
  record_step_ = current_step;
}

}  // namespace keel::probe
