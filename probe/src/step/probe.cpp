// Probe::Impl's step on the host: plan (step_plan.hpp), reduce, decide (StepDecision), apply,
// measure the update, record (StepRecordBuilder's values). Attaching is probe_attach.cpp, the
// step's events probe_events.cpp, the buffers WatchedBuffers, the layers PlannedLayers.
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
  StepPlan plan = this->plan();
  uint64_t grad_passes_before = layers_.reducer().grad_passes();
  times.planned = Clock::now();
  buffers_.enqueue(events_, record_step_);
  // The closure form decides on the host: an unsafe step must be known before its update, to
  // run it again while its closure and batch are there (DESIGN §2.1). The plain form defers.
  // A rewind is taken on the host: its step is skipped, and the state it leaves is not settled later.
  bool rewinding = control_.rewinds(step_);
  if (!rerun_.has_closure() && !rewinding && deferrable_device(plan, loss) >= 0) {
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
    plan = this->plan();
    grad_passes_before = layers_.reducer().grad_passes();
    reduction = reduce(loss, plan, outcome);
    timing_.set_hooks(timing_.hooks() + hooks_us);
  }
  classify_layers(plan, layers_, grad_passes_before);
  buffers_.collect(events_, record_step_);
  decision_.decide(control_.skips(step_), reduction, options_, loss_is_the_jobs(), outcome);
  if (rewinding) {
    // Its gradients are of the state the rewind leaves.
    outcome.applied = false;
    outcome.skip_reason = "rewind";
  }
  DumpDue dump = dump_due(reduction, /*take_requested=*/true, buffers_.turn_nonfinite());
  if (skip_agreement_) agree_with_ranks(reduction, outcome, dump, rewinding);
  if (!reduction.stats_ok) report_probe_error("the step's reductions", reduction.error, StepDecision::consequence_of(outcome));
  take_due_dump(dump);
  trace_origin_if_due(reduction, outcome);

  times.optimizer_start = Clock::now();
  try {
    snapshots_.order_before_update();
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
  // Before the record, which then says so with its events.
  std::optional<Rewound> rewound;
  if (rewinding) rewound = rewind(outcome.step);
  times.updated = Clock::now();
  record(plan, reduction, outcome, times);
  times.recorded = Clock::now();
  last_settled_ = outcome;
  end_step(plan, reduction, times, rewinding);
  if (rewound) {
    step_ = rewound->to_step;
    // The trainer's own code, once the probe is at the step it goes on from: its exceptions are its own.
    if (options_.on_rewind) options_.on_rewind(outcome.step, rewound->to_step, rewound->lr_factor);
  }
  return outcome;
}

void Probe::Impl::begin_step() {
  // Events that have not gone out yet (raised after the last record, or with a record that
  // failed to go out) go with this step's.
  events_.drop_published();
  dumps_.report_finished(events_, record_step_);
  events_.tell_subscription_resets(publisher_.get(), record_step_);
  recording_.report_drops(events_, record_step_);
  control_.report_refusals(publisher_.get(), events_, record_step_);
  // Before anything reads the policies: a command changes them from this step on.
  control_.take_commands(RemoteControl::Run{step_, options_, description_, dumps_, snapshots_, events_, publisher_.get()});
}

void Probe::Impl::follow_layout(bool tensors_in_walk) {
  layers_.follow(tensors_in_walk, PlannedLayers::Run{*model_, optimizer_.get(), options_, description_, publisher_.get(),
                                                     events_, record_step_, buffers_.sequence()});
  record_.message().layer_count = static_cast<uint32_t>(layers_.params().size());
}

Reduction Probe::Impl::reduce(const torch::Tensor& loss, const StepPlan& plan, StepOutcome& outcome) {
  Reduction r;
  LayerReducer& reducer = layers_.reducer();
  decision_.forget();
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
    decision_.judge(r.loss, has_loss, plan.grads_due ? reducer.grad_stats() : kNoGrads,
                    [this](size_t layer) { return layers_.order().position(layer); }, outcome);
    if (scaler_active) {
      if (unscale_here) scaler_->mark_unscaled(outcome.nonfinite_layers > 0);
      if (scaler_out_of_step_) scaler_->mark_probe_failed();   // probe_impl.hpp
      scaler_out_of_step_ = false;
      r.scaler_found_inf = scaler_->found_inf();
      r.scale = scaler_->scale_value();
    }
    // An overflow found by the scaler is its business (backoff), not a spike.
    decision_.judge_spike(plan.grads_due && !r.scaler_found_inf);
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
    decision_.forget();
    if (scaler_ && scaler_->enabled()) {
      scaler_->mark_probe_failed();
      scaler_out_of_step_ = false;
      r.scaler_found_inf = true;
    }
  }
  return r;
}

Probe::Impl::DumpDue Probe::Impl::dump_due(const Reduction& r, bool take_requested, bool buffers_start) const {
  DumpDue due;
  // The state the gradients were computed on, before this step's update touches it.
  const bool gradients_start = decision_.starts_unsafe_run(r.stats_ok);
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
  take_dump(record_step_, due.command ? "command" : dump_reason_of(due.automatic), request);
  if (request) control_.dump_taken();
}

void Probe::Impl::take_dump(int64_t step, const std::string& reason, const std::optional<DumpRequest>& request) {
  const CheckpointDumps::Subject subject{*model_, *optimizer_, description_, publisher_.get(), control_.commands()};
  CheckpointDumps::AgreeOnDump agree;
  if (skip_agreement_) agree = [this](const std::string& refusal) { return agree_on_dump(refusal); };
  dumps_.take(step, reason, request, subject, agree, events_);
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
    wire::StepRecord& message = record_.message();
    message.step = record_step_;
    message.loss = r.loss;
    if (r.lr) {
      message.lr = *r.lr;
      message.group_lrs = r.group_lrs;
    } else {
      read_lrs(*optimizer_, message.lr, message.group_lrs);
    }
    message.skipped = !outcome.applied;
    message.skip_reason = outcome.skip_reason;
    message.step_time_us = timing_.since_last_step(times.enter);
    // A metric the probe failed to measure is absent, not a stale or partial value.
    const bool per_layer = StepRecordBuilder::per_layer_due(options_, record_step_, !description_.modules.empty(),
                                                            outcome.applied, decision_.health().blown_up());
    record_.fill_values(plan.mask & ~r.lost_mask, outcome.applied, per_layer, plan.grads_due && r.stats_ok,
                        layers_.reducer(), description_.modules);
    message.frozen_layers = plan.frozen;
    message.unused_layers = plan.unused;
    outcome.grad_norm = message.grad_norm;
    if (watches) {
      message.watches = std::move(*watches);
    } else {
      try {
        watches_.collect(message.watches);
      } catch (const std::exception& e) {
        message.watches.clear();
        report_probe_error("reading the watched tensors", e.what(), "not measured this step");
      }
    }
    message.buffer_absmax = buffers_.absmax();
    if (scaler_ && scaler_->enabled()) {
      // The step's own overflow: a deferred step's settles when the next step has begun, and
      // the caller's unscale_() of that next step may have found its own by then.
      message.scaler = wire::ScalerState{scaler_->scale_value(), scaler_->growth_tracker(), r.scaler_found_inf,
                                         scaler_->skipped_total()};
    } else {
      message.scaler.reset();
    }
    classify(plan, r);
    const std::optional<StepCause>& cause = cause_of_step_.cause();
    message.cause = cause ? cause->cause.kind : std::string();
    raise_events(outcome, r.stats_ok);
    watch_divergence(outcome, r);
    watch_forecast(message);
    message.dropped = publisher_ ? publisher_->dropped() : 0;
    message.probe_errors = events_.probe_errors();
    message.record_dropped = recording_.dropped();
    message.snapshot_bytes = snapshots_.bytes();
    message.stamp_unix_ns = unix_ns();
    message.probe_us = timing_.probe_us(times, Clock::now());
    tell_events();
    if (publisher_) {
      events_.publish_unpublished(*publisher_);
      publisher_->publish(message);
    }
    events_.mark_published();
  } catch (const std::exception& e) {
    report_probe_error("publishing the step's record", e.what(), "its record is lost; its events go with the next");
  }
}

void Probe::Impl::end_step(const StepPlan& plan, const Reduction& r, const StepTimes& times, bool rewinding) {
  // Valid only while nothing but our own update pass has touched the weights since.
  const uint32_t update_bit = wire::bit_of(LayerMetric::kUpdateRatio);
  const bool snapshot_current =
      r.stats_ok && plan.update_due && !(r.lost_mask & update_bit) && layers_.reducer().next_norms_measured();
  const auto end_start = Clock::now();
  layers_.end_step(snapshot_current);
  // Counted as the step's end: a snapshot's copies are the probe's time on the training thread.
  if (!rewinding) take_snapshot_if_due(step_ + 1);
  const auto end = Clock::now();
  timing_.end_step(times, r.reduce_us, end_start, end);
  ++step_;
}

}  // namespace keel::probe
