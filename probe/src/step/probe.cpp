// Probe::Impl's step on the host: reduce, decide, apply, measure the update, record. Attaching
// is probe_attach.cpp, the step's events probe_events.cpp, the buffers WatchedBuffers, the
// layers PlannedLayers.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "probe_impl.hpp"
#include "layout_check_in_walk.hpp"

namespace keel::probe {
namespace {

using wire::LayerMetric;

}  // namespace

void Probe::Impl::watch(const std::string& name, const torch::Tensor& tensor) {
  if (rerun_.rerunning()) return;
  const auto start = Clock::now();
  try {
    const size_t known = watches_.names().size();
    watches_.watch(name, tensor);
    if (watches_.names().size() != known) {
      description_.watches = watches_.names();
      if (publisher_) publisher_->describe(description_);
    }
  } catch (const std::exception& e) {
    report_probe_error("watching " + name, e.what(), "not measured this step", step_);
  }
  timing_.add_outside_step(micros(Clock::now() - start));
}

StepOutcome Probe::Impl::step(const torch::Tensor& loss) {
  StepTimes times;
  times.enter = Clock::now();
  StepOutcome outcome;
  outcome.step = step_;
  record_step_ = step_;
  begin_step();
  // The last step's record, when it was deferred: its results are in by now.
  settle_pending();
  times.begun = Clock::now();
  // After it: the settled step was of the old layers. A model planned on the CPU has its
  // tensors checked by the gradient walk, which reads them anyway (LayoutCheckInWalk).
  follow_layout(/*tensors_in_walk=*/layers_.reducer().all_on_cpu() && gradient_pass_due());
  buffers_.follow(*model_, description_, publisher_.get(), events_, record_step_);
  StepPlan plan = plan_step();
  uint64_t grad_passes_before = layers_.reducer().grad_passes();
  times.planned = Clock::now();
  buffers_.enqueue(events_, record_step_);
  // The closure form decides on the host: an unsafe step must be known before its update, to
  // run it again while its closure and batch are there (DESIGN §2.1). The plain form defers.
  if (!rerun_.has_closure() && deferrable_device(plan, loss) >= 0) {
    deferred_step(loss, plan, grad_passes_before, outcome, times);
    end_step(plan, Reduction{}, times);
    return outcome;
  }
  Reduction reduction = reduce(loss, plan, outcome);
  if (reduction.layout_moved) {
    // Found before any gradient was written: the layers are planned again, as at a step's
    // start, and the step is reduced with them.
    // The hooks' time was taken from the old reducer; the new one's hooks have not run yet
    // (and a step whose layers could not be planned fails before it takes any).
    const double hooks_us = timing_.hooks();
    timing_.set_hooks(0);
    follow_layout(/*tensors_in_walk=*/false);
    plan = plan_step();
    grad_passes_before = layers_.reducer().grad_passes();
    reduction = reduce(loss, plan, outcome);
    timing_.set_hooks(timing_.hooks() + hooks_us);
  }
  classify_layers(plan, grad_passes_before);
  buffers_.collect(events_, record_step_);
  decide(reduction, outcome);
  DumpDue dump = dump_due(reduction, /*take_requested=*/true, buffers_.turn_nonfinite());
  if (skip_agreement_) agree_with_ranks(reduction, outcome, dump);
  if (!reduction.stats_ok) report_probe_error("the step's reductions", reduction.error, consequence_of(outcome));
  take_due_dump(dump);
  trace_origin_if_due(reduction, outcome);

  times.optimizer_start = Clock::now();
  try {
    if (outcome.applied) optimizer_->step();
  } catch (...) {
    // The user's optimizer threw: its exception is theirs. The scaler must not stay marked
    // unscaled, or the next step's gradients (scaled again) would reach the optimizer unscaled.
    if (scaler_ && scaler_->enabled()) scaler_->rearm();
    throw;
  }
  times.optimizer_end = Clock::now();
  if (scaler_ && scaler_->enabled()) scaler_->update();

  if (reduction.stats_ok) measure_updates(plan, outcome.applied, reduction);
  times.updated = Clock::now();
  record(plan, reduction, outcome, times);
  times.recorded = Clock::now();
  last_settled_ = outcome;
  end_step(plan, reduction, times);
  return outcome;
}

void Probe::Impl::begin_step() {
  // Events that have not gone out yet (raised after the last record, or with a record that
  // failed to go out) go with this step's.
  events_.drop_published();
  dumps_.report_finished(events_, record_step_);
  report_subscription_resets();
  recording_.report_drops(events_, record_step_);
  control_.report_refusals(publisher_.get(), events_, record_step_);
  // Before anything reads the policies: a command changes them from this step on.
  control_.take_commands(RemoteControl::Run{step_, options_, description_, dumps_, events_, publisher_.get()});
}

void Probe::Impl::follow_layout(bool tensors_in_walk) {
  layers_.follow(tensors_in_walk, PlannedLayers::Run{*model_, optimizer_.get(), options_, description_, publisher_.get(),
                                                     events_, record_step_, buffers_.sequence()});
  record_.layer_count = static_cast<uint32_t>(layers_.params().size());
}

bool Probe::Impl::gradient_pass_due() const {
  for (int m = 0; m < wire::kLayerMetricCount; ++m) {
    if ((wire::kGradientMetrics & (1u << m)) != 0 && due(static_cast<LayerMetric>(m))) return true;
  }
  return options_.skip_on_nonfinite || options_.skip_on_spike || options_.dump_on_nonfinite || scaler_ != nullptr;
}

Probe::Impl::StepPlan Probe::Impl::plan_step() const {
  StepPlan plan;
  for (int m = 0; m < wire::kLayerMetricCount; ++m) {
    if (due(static_cast<LayerMetric>(m))) plan.mask |= 1u << m;
  }
  plan.grads_due = gradient_pass_due();
  // Without a rule to rebuild it, the update of a layer on a device needs a copy of the
  // weights there: only when asked for (snapshot_for_update_ratio).
  const uint32_t update_bit = wire::bit_of(LayerMetric::kUpdateRatio);
  if ((plan.mask & update_bit) && !options_.snapshot_for_update_ratio && layers_.reducer().needs_device_snapshot()) {
    plan.mask &= ~update_bit;
  }
  plan.update_due = (plan.mask & update_bit) != 0;
  plan.param_due = plan.update_due || (plan.mask & wire::bit_of(LayerMetric::kParamNorm)) != 0;
  return plan;
}

void Probe::Impl::classify_layers(StepPlan& plan, uint64_t grad_passes_before) const {
  // Freezing and unfreezing mid-run is read each step. Unused: no gradient at all (zero_grad
  // sets them to none), or one left from an earlier step that this backward did not add to.
  // This step's gradient pass read each layer's state on its way to the gradient: a second
  // walk to the same bookkeeping, out of cache on a wide model, is made only without one.
  const bool from_pass = layers_.reducer().grad_passes() != grad_passes_before;
  plan.frozen.clear();
  plan.unused.clear();
  for (size_t i = 0; i < layers_.params().size(); ++i) {
    LayerReducer::LayerState state;
    if (from_pass) {
      state = layers_.reducer().layer_state(i);
    } else {
      // Ask for a later tensor's bookkeeping while this one's is read (LayerReducer does too).
      if (i + 8 < layers_.params().size()) __builtin_prefetch(layers_.params()[i + 8].unsafeGetTensorImpl());
      state = LayerReducer::state_of(layers_.params()[i]);
    }
    if (state == LayerReducer::LayerState::kFrozen) {
      plan.frozen.push_back(static_cast<uint32_t>(i));
    } else if (state == LayerReducer::LayerState::kWithoutGrad || layers_.order().passed_by(i)) {
      plan.unused.push_back(static_cast<uint32_t>(i));
    }
  }
}

Probe::Impl::Reduction Probe::Impl::reduce(const torch::Tensor& loss, const StepPlan& plan, StepOutcome& outcome) {
  Reduction r;
  LayerReducer& reducer = layers_.reducer();
  health_ = StepHealth{};
  try {
    // The layers could not be planned for the model as it is: measuring with the old plan
    // would read stale or foreign memory, so the step ends as a probe failure.
    if (!layers_.error().empty()) throw std::runtime_error(layers_.error());
    // "Unscale by 1" is still an unscale: the pass's found_inf is this step's at any scale.
    const bool scaler_active = scaler_ && scaler_->enabled();
    const bool unscale_here = scaler_active && !scaler_->unscaled();
    const float unscale = unscale_here ? scaler_->inv_scale_value() : 1.0f;
    const auto reduce_start = Clock::now();
    timing_.set_hooks(reducer.take_hook_us());
    static const std::vector<GradStats> kNoGrads;
    // Before the gradient pass, which may read the weights too.
    reducer.plan_update(plan.update_due && plan.grads_due);
    std::optional<LayoutCheckInWalk> walk_check = layers_.take_walk_check();
    if (plan.grads_due && !reducer.enqueue_grads(unscale, walk_check ? &*walk_check : nullptr)) {
      r.layout_moved = true;
      return r;
    }
    if (walk_check && walk_check->weights_written()) layers_.weights_written();
    // The weights before the update, enqueued ahead of the gradients' results so that one
    // wait on a device brings both in.
    const bool reuse_snapshot = plan.update_due && layers_.snapshot_current() && reducer.update_needs_no_copy();
    const bool weights_due = !reuse_snapshot && (plan.update_due || plan.param_due);
    if (weights_due) reducer.enqueue_weights(/*for_update=*/plan.update_due);
    // Read before the update: a non-finite loss is a reason to skip it.
    const bool has_loss = loss.defined() && loss.numel() == 1;
    if (has_loss) loss_.start(loss, plan.grads_due && loss.is_cuda() && reducer.device_pass_on(loss.device().index()));
    if (plan.grads_due) {
      reducer.finish_grads();
      reducer.collect_grads();
    }
    if (has_loss) r.loss = loss_.value();
    health_ = assess_step(r.loss, has_loss, plan.grads_due ? reducer.grad_stats() : kNoGrads,
                          [this](size_t layer) { return layers_.order().position(layer); });
    outcome.nonfinite_layers = health_.nonfinite_layers;
    outcome.nonfinite_cause = health_.cause();
    if (scaler_active) {
      if (unscale_here) scaler_->mark_unscaled(outcome.nonfinite_layers > 0);
      if (scaler_out_of_step_) scaler_->mark_probe_failed();   // probe_impl.hpp
      scaler_out_of_step_ = false;
      r.scaler_found_inf = scaler_->found_inf();
      r.scale = scaler_->scale_value();
    }
    spike_verdict_ = SpikeVerdict{};
    // An overflow found by the scaler is its business (backoff), not a spike. A norm that
    // overflows fp32 is judged as the Inf that fp32 arithmetic makes of it.
    if (plan.grads_due && !r.scaler_found_inf) {
      spike_verdict_ = spike_.observe(health_.norm_overflow ? std::numeric_limits<double>::infinity()
                                                            : health_.grad_norm);
    }
    if (reuse_snapshot) {
      reducer.reuse_snapshot();
    } else if (weights_due) {
      reducer.collect_weights();
    }
    r.reduce_us = micros(Clock::now() - reduce_start);
  } catch (const std::exception& e) {
    // The probe's own failure must not change training. Without a scaler the update is
    // applied as libtorch would; with one the gradients may still be scaled, or half
    // unscaled, so the step ends as its overflow: skipped, the scale backed off.
    r.stats_ok = false;
    r.error = e.what();
    r.lost_mask = plan.mask;
    // The loss still goes on the record: read directly (a wait on a GPU, on this rare path).
    if (loss.defined() && loss.numel() == 1 && std::isnan(r.loss)) {
      try {
        r.loss = loss.detach().to(torch::kCPU).to(torch::kDouble).item<double>();
      } catch (const std::exception&) {
      }
    }
    health_ = StepHealth{};
    spike_verdict_ = SpikeVerdict{};
    if (scaler_ && scaler_->enabled()) {
      scaler_->mark_probe_failed();
      scaler_out_of_step_ = false;
      r.scaler_found_inf = true;
    }
  }
  return r;
}

void Probe::Impl::decide(const Reduction& r, StepOutcome& outcome) {
  if (control_.skips(step_)) {
    // A remote skip holds whatever the gradients look like: the user asked for no update.
    outcome.applied = false;
    outcome.skip_reason = "command";
  } else if (r.scaler_found_inf) {
    outcome.applied = false;
    outcome.skip_reason = "scaler";
  } else if (r.stats_ok && options_.skip_on_nonfinite && health_.unsafe_to_apply(loss_is_the_jobs())) {
    outcome.applied = false;
    outcome.skip_reason = "nonfinite";
  } else if (r.stats_ok && options_.skip_on_spike && spike_verdict_.spike) {
    outcome.applied = false;
    outcome.skip_reason = "spike";
  }
}

Probe::Impl::DumpDue Probe::Impl::dump_due(const Reduction& r, bool take_requested, bool buffers_start) const {
  DumpDue due;
  // The state the gradients were computed on, before this step's update touches it.
  const bool gradients_start = r.stats_ok && health_.blown_up() && !nonfinite_last_step_;
  if (options_.dump_on_nonfinite && (gradients_start || buffers_start) &&
      dumps_.automatic_allowed(record_step_)) {
    due.automatic = gradients_start ? RankVerdict::AutoDump::kNonfinite : RankVerdict::AutoDump::kNonfiniteBuffer;
  }
  due.command = take_requested && control_.dump_requested();
  return due;
}

void Probe::Impl::take_due_dump(const DumpDue& due) {
  if (!due.command && due.automatic == RankVerdict::AutoDump::kNone) return;
  if (due.automatic != RankVerdict::AutoDump::kNone) dumps_.took_automatic(record_step_);
  // With a sharded job's agreement a command another rank took is this rank's too, with no
  // request of its own to answer.
  const std::optional<DumpRequest> request = due.command ? control_.dump_requested() : std::nullopt;
  const CheckpointDumps::Subject subject{*model_, *optimizer_, description_, publisher_.get(), control_.commands()};
  CheckpointDumps::AgreeOnDump agree;
  if (skip_agreement_) agree = [this](const std::string& refusal) { return agree_on_dump(refusal); };
  dumps_.take(record_step_, due.command ? "command" : dump_reason_of(due.automatic), request, subject, agree, events_);
  if (request) control_.dump_taken();
}

void Probe::Impl::dump_if_due(const Reduction& r, bool take_requested, bool buffers_start) {
  take_due_dump(dump_due(r, take_requested, buffers_start));
}

void Probe::Impl::measure_updates(const StepPlan& plan, bool applied, Reduction& r) {
  try {
    if (plan.update_due && applied) {
      const auto update_start = Clock::now();
      layers_.reducer().reduce_updates();
      r.reduce_us += micros(Clock::now() - update_start);
    } else if (plan.update_due) {
      layers_.reducer().keep_snapshot();
    }
  } catch (const std::exception& e) {
    lose_update_metrics(r, e);
  }
}

void Probe::Impl::lose_update_metrics(Reduction& r, const std::exception& e) {
  r.lost_mask |= wire::bit_of(LayerMetric::kUpdateRatio) | wire::bit_of(LayerMetric::kParamNorm);
  report_probe_error("measuring the update", e.what(), "update_ratio and param_norm not measured this step");
}

void Probe::Impl::record(const StepPlan& plan, Reduction& r, StepOutcome& outcome, const StepTimes& times,
                         std::vector<wire::WatchStats>* watches) {
  try {
    record_.step = record_step_;
    record_.loss = r.loss;
    if (r.lr) {
      record_.lr = *r.lr;
      record_.group_lrs = r.group_lrs;
    } else {
      read_lrs(*optimizer_, record_.lr, record_.group_lrs);
    }
    record_.skipped = !outcome.applied;
    record_.skip_reason = outcome.skip_reason;
    record_.step_time_us = timing_.since_last_step(times.enter);
    // A metric the probe failed to measure is absent, not a stale or partial value.
    fill_values(plan.mask & ~r.lost_mask, outcome, plan.grads_due && r.stats_ok);
    record_.frozen_layers = plan.frozen;
    record_.unused_layers = plan.unused;
    outcome.grad_norm = record_.grad_norm;
    if (watches) {
      record_.watches = std::move(*watches);
    } else {
      try {
        watches_.collect(record_.watches);
      } catch (const std::exception& e) {
        record_.watches.clear();
        report_probe_error("reading the watched tensors", e.what(), "not measured this step");
      }
    }
    record_.buffer_absmax = buffers_.absmax();
    if (scaler_ && scaler_->enabled()) {
      // The step's own overflow: a deferred step's settles when the next step has begun, and
      // the caller's unscale_() of that next step may have found its own by then.
      record_.scaler = wire::ScalerState{scaler_->scale_value(), scaler_->growth_tracker(), r.scaler_found_inf,
                                         scaler_->skipped_total()};
    } else {
      record_.scaler.reset();
    }
    classify(plan, r);
    const std::optional<StepCause>& cause = cause_of_step_.cause();
    record_.cause = cause ? cause->cause.kind : std::string();
    raise_events(outcome, r.stats_ok);
    record_.dropped = publisher_ ? publisher_->dropped() : 0;
    record_.probe_errors = events_.probe_errors();
    record_.record_dropped = recording_.dropped();
    record_.stamp_unix_ns = unix_ns();
    record_.probe_us = timing_.probe_us(times, Clock::now());
    if (publisher_) {
      events_.publish_unpublished(*publisher_);
      publisher_->publish(record_);
    }
    events_.mark_published();
  } catch (const std::exception& e) {
    report_probe_error("publishing the step's record", e.what(), "its record is lost; its events go with the next");
  }
}

void Probe::Impl::end_step(const StepPlan& plan, const Reduction& r, const StepTimes& times) {
  // Valid only while nothing but our own update pass has touched the weights since.
  const uint32_t update_bit = wire::bit_of(LayerMetric::kUpdateRatio);
  const bool snapshot_current =
      r.stats_ok && plan.update_due && !(r.lost_mask & update_bit) && layers_.reducer().next_norms_measured();
  const auto end_start = Clock::now();
  layers_.end_step(snapshot_current);
  const auto end = Clock::now();
  timing_.end_step(times, r.reduce_us, end_start, end);
  ++step_;
}

void Probe::Impl::fill_values(uint32_t mask, const StepOutcome& outcome, bool grads_reduced) {
  const auto& grads = layers_.reducer().grad_stats();
  double total_sumsq = 0;
  for (const auto& s : grads) total_sumsq += s.sumsq;
  // Without a gradient pass this step the stats are the previous step's: report "not
  // measured" rather than a stale norm.
  record_.grad_norm = grads_reduced ? std::sqrt(total_sumsq) : std::numeric_limits<double>::quiet_NaN();
  if (per_layer_due(outcome)) {
    fill_layer_values(mask, outcome.applied);
  } else {
    fill_module_values(mask, outcome.applied);
  }
}

bool Probe::Impl::per_layer_due(const StepOutcome& outcome) const {
  // The first non-finite layer and a skip are read off the per-layer values: such a step,
  // and any step of a model without modules, goes out in full.
  return description_.modules.empty() || !outcome.applied || health_.blown_up() ||
         (record_step_ - options_.first_step) % options_.layer_detail_every == 0;
}

double Probe::Impl::layer_value(LayerMetric metric, size_t i, bool applied) const {
  const GradStats& grad = layers_.reducer().grad_stats()[i];
  switch (metric) {
    case LayerMetric::kGradNorm: return std::sqrt(grad.sumsq);
    case LayerMetric::kGradAbsmax: return grad.absmax;
    case LayerMetric::kGradNonfinite: return static_cast<double>(grad.nonfinite);
    case LayerMetric::kGradZeroFrac: {
      const double numel = static_cast<double>(layers_.reducer().numel(i));
      return numel > 0 ? static_cast<double>(grad.zeros) / numel : 0.0;
    }
    case LayerMetric::kParamNorm: return std::sqrt(layers_.reducer().param_sumsq()[i]);
    case LayerMetric::kUpdateRatio: {
      const double w = std::sqrt(layers_.reducer().param_sumsq()[i]);
      // Undefined for all-zero weights (fresh biases); reported as 0 rather than a
      // non-finite value that would read as an instability.
      return (applied && w > 0) ? std::sqrt(layers_.reducer().update_sumsq()[i]) / w : 0.0;
    }
  }
  return 0.0;
}

void Probe::Impl::fill_layer_values(uint32_t mask, bool applied) {
  const size_t n = layers_.params().size();
  record_.metric_mask = mask;
  record_.layer_values.resize(static_cast<size_t>(__builtin_popcount(mask)) * n);
  record_.module_mask = 0;
  record_.module_count = 0;
  record_.module_values.clear();
  float* out = record_.layer_values.data();
  for (int m = 0; m < wire::kLayerMetricCount; ++m) {
    if (!((mask >> m) & 1u)) continue;
    for (size_t i = 0; i < n; ++i) *out++ = static_cast<float>(layer_value(static_cast<LayerMetric>(m), i, applied));
  }
}

void Probe::Impl::fill_module_values(uint32_t mask, bool applied) {
  const auto& modules = description_.modules;
  record_.metric_mask = 0;
  record_.layer_values.clear();
  record_.module_mask = mask;
  record_.module_count = static_cast<uint32_t>(modules.size());
  record_.module_values.resize(static_cast<size_t>(__builtin_popcount(mask)) * modules.size());
  float* out = record_.module_values.data();
  for (int m = 0; m < wire::kLayerMetricCount; ++m) {
    if (!((mask >> m) & 1u)) continue;
    const auto metric = static_cast<LayerMetric>(m);
    // Its worst layer's value, or a count's sum (wire::ModuleRollup, PROTOCOL §3.3).
    const wire::ModuleRollup rollup = wire::info_of(metric).modules;
    for (const wire::ModuleRange& module : modules) {
      double rolled = 0;
      for (uint32_t i = module.first; i < module.first + module.count; ++i) {
        const double v = layer_value(metric, i, applied);
        switch (rollup) {
          case wire::ModuleRollup::kSum: rolled += v; break;
          case wire::ModuleRollup::kWorst:
            rolled = std::isnan(v) || std::isnan(rolled) ? std::numeric_limits<double>::quiet_NaN() : std::max(rolled, v);
            break;
        }
      }
      *out++ = static_cast<float>(rolled);
    }
  }
}

}  // namespace keel::probe
