#include <cmath>
#include <cstdio>
#include <limits>

#include "keel/wire/curve_keys.hpp"
#include "keel/wire/user_keys.hpp"
#include "probe_impl.hpp"
#include "layout/run_description.hpp"

namespace keel::probe {
namespace {

using wire::LayerMetric;

}  // namespace


namespace {
ModelParameters named_params(torch::nn::Module& model, torch::optim::Optimizer& optimizer) {
  ModelParameters out = parameters_of(model, &optimizer);
  if (out.params.empty()) throw AttachError("keel probe: the model has no parameters to watch");
  return out;
}

bool is_loopback_endpoint(const std::string& endpoint) {
  if (endpoint.rfind("ipc://", 0) == 0 || endpoint.rfind("inproc://", 0) == 0) return true;
  for (const char* host : {"tcp://127.", "tcp://localhost:", "tcp://[::1]:", "tcp://lo:"}) {
    if (endpoint.rfind(host, 0) == 0) return true;
  }
  return false;
}

// Throws AttachError for a rank that cannot be in the job: the dashboard lays ranks out and
// names the first to fail by it, so a typo must not pass for another rank.
void check_rank(const ProbeOptions& options) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    throw AttachError("keel probe: rank " + std::to_string(options.rank) + " is not in a world of " +
                      std::to_string(options.world_size) + " (ranks are 0 .. world_size - 1)");
  }
}

// The model name goes into dump directory names and every message of the run: refused at
// attach, with what is allowed, rather than altered behind the user's back.
void check_model_name(const ProbeOptions& options) {
  // sanitize_label keeps at most 64 of [A-Za-z0-9._-] and drops a leading '.': a name it
  // leaves as it is is one a file name can carry.
  if (sanitize_label(options.model) != options.model) {
    throw AttachError("keel probe: model name \"" + options.model.substr(0, 80) +
                      "\" is not allowed: use at most 64 letters, digits, '.', '_' or '-' (not starting with '.')");
  }
}

// Whether a socket of this probe will ask clients for keys.
bool authenticates(const ProbeOptions& options) {
  return !options.endpoint.empty() && (options.accept_commands || options.authenticate_telemetry);
}

// Commands and telemetry are authenticated by default: with no keys given, the sockets take
// only the key of the user running the trainer (user_keys.hpp). Throws AttachError when that
// key cannot be had, naming the fix.
void use_user_keys_by_default(ProbeOptions& options) {
  if (!authenticates(options) || !options.command_secret_key.empty()) return;
  if (is_loopback_endpoint(options.endpoint) ? options.allow_unauthenticated_local : options.allow_unauthenticated_remote) {
    return;
  }
  try {
    const wire::CurveKeyPair pair = wire::user_key_pair();
    options.command_secret_key = pair.secret_key;
    options.allowed_client_keys = {pair.public_key};
  } catch (const std::exception& e) {
    throw AttachError(std::string("keel probe: commands and telemetry are authenticated with your own key, which is "
                                  "not usable: ") +
                      e.what() +
                      "; or set ProbeOptions::allow_unauthenticated_local (anyone on this machine may then read and "
                      "steer the run)");
  }
}

// Throws AttachError for keys that ZeroMQ would reject later with a less clear message.
void check_command_security(const ProbeOptions& options) {
  if (!authenticates(options)) return;
  // No keys only where it was asked for in so many words (use_user_keys_by_default).
  if (options.command_secret_key.empty()) return;
  if (!wire::curve_available()) {
    throw AttachError("keel probe: authentication needs ZeroMQ with CURVE (libsodium), which this libzmq lacks");
  }
  if (!wire::is_curve_key(options.command_secret_key)) {
    throw AttachError("keel probe: the command secret key is not a 40-character Z85 key");
  }
  if (options.allowed_client_keys.empty()) {
    throw AttachError("keel probe: authentication is on but no client key is allowed");
  }
  for (const std::string& key : options.allowed_client_keys) {
    if (!wire::is_curve_key(key)) {
      throw AttachError("keel probe: allowed client key \"" + key.substr(0, 48) + "\" is not a 40-character Z85 key");
    }
  }
}

}  // namespace

Probe::Impl::Impl(torch::nn::Module& model, const ModelParameters& parameters, torch::optim::Optimizer& optimizer,
                  ProbeOptions options)
    : options_(std::move(options)),
      model_(model),
      optimizer_(optimizer),
      names_(column(parameters.params, &NamedParams::value_type::first)),
      params_(column(parameters.params, &NamedParams::value_type::second)),
      reducer_(params_),
      order_(params_),
      layout_(parameters.params),
      spike_(SpikeRule{options_.spike_window, options_.spike_warmup, options_.spike_z}) {
  description_ = describe_run(parameters, options_);
  try {
    plan_buffers(float_buffers_of(model));
  } catch (const std::exception&) {
    // Attaching must not fail for a check of buffers: none are watched, and the next step
    // tries again (follow_buffers), counted if it fails there.
    buffers_ = ModelBuffers{};
  }
  reducer_.measure_updates_of(&optimizer_);
  check_rank(options_);
  check_model_name(options_);
  use_user_keys_by_default(options_);
  check_command_security(options_);
  if (!options_.endpoint.empty()) {
    PublisherOptions po;
    po.endpoint = options_.endpoint;
    po.queue_capacity = options_.queue_capacity;
    po.send_high_water_mark = options_.send_high_water_mark;
    po.describe_interval = std::chrono::milliseconds(static_cast<int64_t>(options_.describe_interval_secs * 1000));
    po.history_steps = options_.history_steps;
    if (options_.authenticate_telemetry) {
      po.secret_key = options_.command_secret_key;
      po.allowed_client_keys = options_.allowed_client_keys;
    }
    publisher_ = std::make_unique<Publisher>(po, description_);
    const std::string command_at = options_.accept_commands ? command_endpoint_of(options_.endpoint) : std::string();
    if (!command_at.empty()) {
      CommandServerOptions co;
      co.endpoint = command_at;
      co.rank = options_.rank;
      co.run = description_.run_id;
      co.model = description_.model;
      co.secret_key = options_.command_secret_key;
      co.allowed_client_keys = options_.allowed_client_keys;
      if (options_.history_steps > 0) {
        Publisher* publisher = publisher_.get();
        co.history = [publisher] { return publisher->history(); };
        co.event_history = [publisher] { return publisher->event_history(); };
      }
      commands_ = std::make_unique<CommandServer>(co);
    }
  }
  dumps_ = std::make_unique<CheckpointWriter>();
  step_ = options_.first_step;
  record_.rank = options_.rank;
  record_.run = description_.run_id;
  record_.model = description_.model;
  record_.layer_count = static_cast<uint32_t>(params_.size());
}

void Probe::Impl::watch(const std::string& name, const torch::Tensor& tensor) {
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
  watch_us_ += micros(Clock::now() - start);
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
  // After it: the settled step was of the old layers.
  follow_layout();
  follow_buffers();
  const StepPlan plan = plan_step();
  enqueue_buffers();
  if (deferrable_device(plan, loss) >= 0) {
    deferred_step(loss, plan, outcome, times);
    end_step(plan, Reduction{}, times);
    return outcome;
  }
  Reduction reduction = reduce(loss, plan, outcome);
  collect_buffers();
  decide(reduction, outcome);
  if (!reduction.stats_ok) report_probe_error("the step's reductions", reduction.error, consequence_of(outcome));
  dump_if_due(reduction, /*take_requested=*/true, buffers_turn_nonfinite());

  times.optimizer_start = Clock::now();
  try {
    if (outcome.applied) optimizer_.step();
  } catch (...) {
    // The user's optimizer threw: its exception is theirs. The scaler must not stay marked
    // unscaled, or the next step's gradients (scaled again) would reach the optimizer unscaled.
    if (scaler_ && scaler_->enabled()) scaler_->rearm();
    throw;
  }
  times.optimizer_end = Clock::now();
  if (scaler_ && scaler_->enabled()) scaler_->update();

  if (reduction.stats_ok) measure_updates(plan, outcome.applied, reduction);
  record(plan, reduction, outcome, times);
  last_settled_ = outcome;
  end_step(plan, reduction, times);
  return outcome;
}

void Probe::Impl::begin_step() {
  // Events that have not gone out yet (raised after the last record, or with a record that
  // failed to go out) go with this step's.
  events_.erase(events_.begin(), events_.begin() + static_cast<std::ptrdiff_t>(events_published_));
  events_published_ = 0;
  report_finished_dumps();
  report_subscription_resets();
  report_refusals();
  // Before anything reads the policies: a command changes them from this step on. Answered
  // now rather than after the step: the decision is made, and the round trip stays within
  // one step interval.
  apply_commands();
  if (commands_ && !acks_.empty()) {
    for (const auto& [ticket, ack] : acks_) commands_->reply(ticket, ack);
    acks_.clear();
  }
}

Probe::Impl::StepPlan Probe::Impl::plan_step() const {
  StepPlan plan;
  for (int m = 0; m < wire::kLayerMetricCount; ++m) {
    if (due(static_cast<LayerMetric>(m))) plan.mask |= 1u << m;
  }
  plan.grads_due = (plan.mask & wire::kGradientMetrics) != 0 || options_.skip_on_nonfinite || options_.skip_on_spike ||
                   options_.dump_on_nonfinite || scaler_ != nullptr;
  // Without a rule to rebuild it, the update of a layer on a device needs a copy of the
  // weights there: only when asked for (snapshot_for_update_ratio).
  const uint32_t update_bit = wire::bit_of(LayerMetric::kUpdateRatio);
  if ((plan.mask & update_bit) && !options_.snapshot_for_update_ratio && reducer_.needs_device_snapshot()) {
    plan.mask &= ~update_bit;
  }
  plan.update_due = (plan.mask & update_bit) != 0;
  plan.param_due = plan.update_due || (plan.mask & wire::bit_of(LayerMetric::kParamNorm)) != 0;
  // Freezing and unfreezing mid-run is read each step. Unused: no gradient at all (zero_grad
  // sets them to none), or one left from an earlier step that this backward did not add to.
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].requires_grad()) {
      plan.frozen.push_back(static_cast<uint32_t>(i));
    } else if (!params_[i].grad().defined() || order_.passed_by(i)) {
      plan.unused.push_back(static_cast<uint32_t>(i));
    }
  }
  return plan;
}

Probe::Impl::Reduction Probe::Impl::reduce(const torch::Tensor& loss, const StepPlan& plan, StepOutcome& outcome) {
  Reduction r;
  health_ = StepHealth{};
  try {
    // The layers could not be planned for the model as it is: measuring with the old plan
    // would read stale or foreign memory, so the step ends as a probe failure.
    if (!layout_error_.empty()) throw std::runtime_error(layout_error_);
    // "Unscale by 1" is still an unscale: the pass's found_inf is this step's at any scale.
    const bool scaler_active = scaler_ && scaler_->enabled();
    const bool unscale_here = scaler_active && !scaler_->unscaled();
    const float unscale = unscale_here ? scaler_->inv_scale_value() : 1.0f;
    const auto reduce_start = Clock::now();
    static const std::vector<GradStats> kNoGrads;
    if (plan.grads_due) reducer_.enqueue_grads(unscale);
    // The weights before the update, enqueued ahead of the gradients' results so that one
    // wait on a device brings both in.
    const bool reuse_snapshot = plan.update_due && snapshot_current_;
    const bool weights_due = !reuse_snapshot && (plan.update_due || plan.param_due);
    if (weights_due) reducer_.enqueue_weights(/*for_update=*/plan.update_due);
    // Read before the update: a non-finite loss is a reason to skip it.
    const bool has_loss = loss.defined() && loss.numel() == 1;
    if (has_loss) loss_.start(loss, plan.grads_due && loss.is_cuda() && reducer_.device_pass_on(loss.device().index()));
    if (plan.grads_due) {
      reducer_.finish_grads();
      reducer_.collect_grads();
    }
    if (has_loss) r.loss = loss_.value();
    health_ = assess_step(r.loss, has_loss, plan.grads_due ? reducer_.grad_stats() : kNoGrads,
                          [this](size_t layer) { return order_.position(layer); });
    outcome.nonfinite_layers = health_.nonfinite_layers;
    outcome.nonfinite_cause = health_.cause();
    if (scaler_active) {
      if (unscale_here) scaler_->mark_unscaled(outcome.nonfinite_layers > 0);
      if (scaler_out_of_step_) scaler_->mark_probe_failed();   // probe_impl.hpp
      scaler_out_of_step_ = false;
      r.scaler_found_inf = scaler_->found_inf();
    }
    spike_verdict_ = SpikeVerdict{};
    // An overflow found by the scaler is its business (backoff), not a spike. A norm that
    // overflows fp32 is judged as the Inf that fp32 arithmetic makes of it.
    if (plan.grads_due && !r.scaler_found_inf) {
      spike_verdict_ = spike_.observe(health_.norm_overflow ? std::numeric_limits<double>::infinity()
                                                            : health_.grad_norm);
    }
    if (reuse_snapshot) {
      reducer_.reuse_snapshot();
    } else if (weights_due) {
      reducer_.collect_weights();
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
  // A step scheduled by an at_step skip is taken off the schedule whether or not a "next
  // updates" skip also covers it: either way it is skipped once.
  const bool scheduled_skip = !scheduled_skips_.empty() && scheduled_skips_.erase(step_) > 0;
  if (command_skips_left_ > 0 || scheduled_skip) {
    // A remote skip holds whatever the gradients look like: the user asked for no update.
    if (command_skips_left_ > 0) --command_skips_left_;
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

void Probe::Impl::dump_if_due(const Reduction& r, bool take_requested, bool buffers_start) {
  // The state the gradients were computed on, before this step's update touches it.
  const bool gradients_start = r.stats_ok && health_.blown_up() && !nonfinite_last_step_;
  const bool auto_dump_due = options_.dump_on_nonfinite && (gradients_start || buffers_start) &&
                             (!last_auto_dump_step_ || record_step_ - *last_auto_dump_step_ >= options_.dump_nonfinite_every);
  const bool requested = take_requested && dump_requested_;
  if (requested || auto_dump_due) {
    if (auto_dump_due) last_auto_dump_step_ = record_step_;
    const std::optional<DumpRequest> request = requested ? dump_requested_ : std::nullopt;
    take_dump(request ? "command" : gradients_start ? "nonfinite" : "nonfinite_buffer", request);
    if (requested) dump_requested_.reset();
  }
}

void Probe::Impl::measure_updates(const StepPlan& plan, bool applied, Reduction& r) {
  try {
    if (plan.update_due && applied) {
      const auto update_start = Clock::now();
      reducer_.reduce_updates();
      r.reduce_us += micros(Clock::now() - update_start);
    } else if (plan.update_due) {
      reducer_.keep_snapshot();
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
      read_lrs(optimizer_, record_.lr, record_.group_lrs);
    }
    record_.skipped = !outcome.applied;
    record_.skip_reason = outcome.skip_reason;
    record_.step_time_us = last_step_enter_ ? micros(times.enter - *last_step_enter_) : 0.0;
    // A metric the probe failed to measure is absent, not a stale or partial value.
    fill_layer_values(plan.mask & ~r.lost_mask, outcome.applied, plan.grads_due && r.stats_ok);
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
    record_.buffer_absmax = buffer_absmax_;
    if (scaler_ && scaler_->enabled()) {
      // The step's own overflow: a deferred step's settles when the next step has begun, and
      // the caller's unscale_() of that next step may have found its own by then.
      record_.scaler = wire::ScalerState{scaler_->scale_value(), scaler_->growth_tracker(), r.scaler_found_inf,
                                         scaler_->skipped_total()};
    } else {
      record_.scaler.reset();
    }
    raise_events(outcome, r.stats_ok);
    record_.dropped = publisher_ ? publisher_->dropped() : 0;
    record_.probe_errors = probe_errors_;
    record_.stamp_unix_ns = unix_ns();
    record_.probe_us = micros(times.optimizer_start - times.enter) + micros(Clock::now() - times.optimizer_end) + watch_us_;
    if (publisher_) {
      for (size_t e = events_published_; e < events_.size(); ++e) publisher_->publish(events_[e]);
      publisher_->publish(record_);
    }
    events_published_ = events_.size();
  } catch (const std::exception& e) {
    report_probe_error("publishing the step's record", e.what(), "its record is lost; its events go with the next");
  }
}

void Probe::Impl::end_step(const StepPlan& plan, const Reduction& r, const StepTimes& times) {
  // Valid only while nothing but our own update pass has touched the weights since.
  const uint32_t update_bit = wire::bit_of(LayerMetric::kUpdateRatio);
  snapshot_current_ = r.stats_ok && plan.update_due && !(r.lost_mask & update_bit);
  // The optimizer's writes are the step's: a write after this one is the user's.
  layout_.remember_weights(params_);
  order_.rearm();
  timing_.probe_us = micros(times.optimizer_start - times.enter) + micros(Clock::now() - times.optimizer_end) + watch_us_;
  timing_.reduce_us = r.reduce_us + watch_us_;
  watch_us_ = 0;
  last_step_enter_ = times.enter;
  ++step_;
}

void Probe::Impl::fill_layer_values(uint32_t mask, bool applied, bool grads_reduced) {
  const size_t n = params_.size();
  record_.metric_mask = mask;
  record_.layer_values.resize(static_cast<size_t>(__builtin_popcount(mask)) * n);
  const auto& grads = reducer_.grad_stats();
  const auto& param_sumsq = reducer_.param_sumsq();
  const auto& update_sumsq = reducer_.update_sumsq();
  double total_sumsq = 0;
  for (const auto& s : grads) total_sumsq += s.sumsq;
  // Without a gradient pass this step the stats are the previous step's: report "not
  // measured" rather than a stale norm.
  record_.grad_norm = grads_reduced ? std::sqrt(total_sumsq) : std::numeric_limits<double>::quiet_NaN();

  float* out = record_.layer_values.data();
  for (int m = 0; m < wire::kLayerMetricCount; ++m) {
    if (!((mask >> m) & 1u)) continue;
    const auto metric = static_cast<LayerMetric>(m);
    for (size_t i = 0; i < n; ++i) {
      const double numel = static_cast<double>(params_[i].numel());
      double v = 0;
      switch (metric) {
        case LayerMetric::kGradNorm: v = std::sqrt(grads[i].sumsq); break;
        case LayerMetric::kGradAbsmax: v = grads[i].absmax; break;
        case LayerMetric::kGradNonfinite: v = static_cast<double>(grads[i].nonfinite); break;
        case LayerMetric::kGradZeroFrac: v = numel > 0 ? static_cast<double>(grads[i].zeros) / numel : 0.0; break;
        case LayerMetric::kParamNorm: v = std::sqrt(param_sumsq[i]); break;
        case LayerMetric::kUpdateRatio: {
          const double w = std::sqrt(param_sumsq[i]);
          // Undefined for all-zero weights (fresh biases); reported as 0 rather than a
          // non-finite value that would read as an instability.
          v = (applied && w > 0) ? std::sqrt(update_sumsq[i]) / w : 0.0;
          break;
        }
      }
      *out++ = static_cast<float>(v);
    }
  }
}

void Probe::Impl::add_event(const std::string& kind, const std::string& layer, const std::string& detail,
                            std::optional<int64_t> step) {
  wire::Event e;
  e.rank = options_.rank;
  e.run = description_.run_id;
  e.model = description_.model;
  e.step = step.value_or(record_step_);
  e.kind = kind;
  e.layer = layer;
  e.detail = detail;
  e.stamp_unix_ns = unix_ns();
  events_.push_back(std::move(e));
}

void Probe::Impl::report_probe_error(const std::string& what, const std::string& error,
                                     const std::string& consequence, std::optional<int64_t> step) {
  ++probe_errors_;
  // Bounded: an exception's text can be anything (a CUDA message, a tensor's repr).
  constexpr size_t kMaxError = 400;
  const std::string shown = error.size() > kMaxError ? error.substr(0, kMaxError) + "..." : error;
  add_event("probe_error", "", "keel failed " + what + ": " + shown + "; " + consequence, step);
}

std::string Probe::Impl::consequence_of(const StepOutcome& outcome) {
  if (outcome.applied) return "update applied as libtorch would";
  if (outcome.skip_reason == "scaler") {
    return "update skipped as an overflow (the gradients may still be scaled) and the loss scale backed off";
  }
  return "update skipped: " + outcome.skip_reason;
}

void Probe::Impl::raise_events(const StepOutcome& outcome, bool measured) {
  // An unmeasured step says nothing about health: the run of unsafe steps neither starts nor ends.
  if (measured && health_.blown_up() && !nonfinite_last_step_) {
    const bool named = health_.layer != StepHealth::kNoLayer;
    std::string detail = describe_health(health_, record_.loss, reducer_.grad_stats(), names_);
    if (outcome.applied && options_.skip_on_nonfinite && !health_.unsafe_to_apply(loss_is_the_jobs())) {
      detail += "; update applied: this rank's loss alone is non-finite and its gradients are safe, and a rank "
                "skipping on its own would leave the replicas apart";
    }
    add_event("first_nonfinite", named ? names_[health_.layer] : std::string(), detail);
  }
  if (measured) nonfinite_last_step_ = health_.blown_up();

  bool watch_nonfinite = false;
  for (const auto& w : record_.watches) {
    if (w.nonfinite == 0) continue;
    if (!watch_nonfinite && !watch_nonfinite_last_step_) {
      add_event("first_nonfinite_watch", w.name,
                std::to_string(w.nonfinite) + " non-finite values in watched tensor " + w.name);
    }
    watch_nonfinite = true;
  }
  watch_nonfinite_last_step_ = watch_nonfinite;

  // Buffers not measured this step say nothing: the run of non-finite buffers neither starts nor ends.
  if (!buffer_absmax_.empty()) {
    const int first = first_nonfinite_buffer();
    if (first >= 0 && !buffer_nonfinite_last_step_) {
      add_event("nonfinite_buffer", watched_buffers_.names[static_cast<size_t>(first)], describe_nonfinite_buffers());
    }
    buffer_nonfinite_last_step_ = first >= 0;
  }

  // A non-finite norm is a spike to the policy, but its event would repeat first_nonfinite.
  if (measured && spike_verdict_.spike && std::isfinite(spike_verdict_.z)) {
    char text[160];
    std::snprintf(text, sizeof text, "grad norm %.4g is %.1f sigma above the typical %.4g of the last %zu steps (log scale); ",
                  record_.grad_norm, spike_verdict_.z, spike_verdict_.mean_norm, spike_verdict_.compared_with);
    add_event("spike", "", std::string(text) + (outcome.skip_reason == "spike" ? "update skipped"
                                               : options_.skip_on_spike ? "update not applied: " + outcome.skip_reason
                                                                        : "policy skip_spike off: update applied"));
  }
  if (!outcome.applied) {
    add_event("skip", "", "update skipped: " + outcome.skip_reason +
                              (outcome.skip_reason == "nonfinite" ? " (" + outcome.nonfinite_cause + ")" : ""));
  }
}

void Probe::Impl::plan_buffers(ModelBuffers all) {
  std::vector<float> absmax;
  BufferReducer all_pass(all.tensors);
  all_pass.enqueue();
  all_pass.collect(absmax);
  ModelBuffers watched;
  for (size_t i = 0; i < all.tensors.size(); ++i) {
    if (!std::isfinite(absmax[i])) continue;
    watched.names.push_back(all.names[i]);
    watched.tensors.push_back(all.tensors[i]);
  }
  BufferReducer reducer(watched.tensors);
  buffers_ = std::move(all);
  watched_buffers_ = std::move(watched);
  buffer_reducer_ = std::move(reducer);
  description_.buffers = watched_buffers_.names;
  buffer_nonfinite_last_step_ = false;
}

void Probe::Impl::follow_buffers() {
  try {
    ModelBuffers now = float_buffers_of(model_);
    if (now.same_as(buffers_)) return;
    const size_t before = watched_buffers_.names.size();
    plan_buffers(std::move(now));
    if (publisher_) publisher_->describe(description_);
    add_event("layout_changed", "",
              "the model's floating-point buffers changed after the last step (" + std::to_string(before) +
                  " watched before, " + std::to_string(watched_buffers_.names.size()) +
                  " now); they are measured as they are now, and the run is re-described");
  } catch (const std::exception& e) {
    report_probe_error("following the model's buffers", e.what(), "the buffers are measured as they were planned");
  }
}

void Probe::Impl::enqueue_buffers() {
  buffer_absmax_.clear();
  if (buffer_reducer_.size() == 0) return;
  try {
    buffer_reducer_.enqueue();
  } catch (const std::exception& e) {
    report_probe_error("measuring the model's buffers", e.what(), "buffers not measured this step");
  }
}

void Probe::Impl::collect_buffers() {
  buffer_absmax_.clear();
  if (!buffer_reducer_.pending()) return;
  try {
    buffer_reducer_.collect(buffer_absmax_);
  } catch (const std::exception& e) {
    buffer_absmax_.clear();
    report_probe_error("reading the model's buffers", e.what(), "buffers not measured this step");
  }
}

int Probe::Impl::first_nonfinite_buffer() const {
  for (size_t i = 0; i < buffer_absmax_.size(); ++i) {
    if (!std::isfinite(buffer_absmax_[i])) return static_cast<int>(i);
  }
  return -1;
}

bool Probe::Impl::buffers_turn_nonfinite() const {
  return !buffer_nonfinite_last_step_ && first_nonfinite_buffer() >= 0;
}

std::string Probe::Impl::describe_nonfinite_buffers() const {
  std::string first, others;
  size_t count = 0;
  for (size_t i = 0; i < buffer_absmax_.size(); ++i) {
    if (std::isfinite(buffer_absmax_[i])) continue;
    const std::string what = watched_buffers_.names[i] + (std::isnan(buffer_absmax_[i]) ? " (NaN)" : " (Inf)");
    if (count == 0) {
      first = what;
    } else if (count <= 8) {
      others += (others.empty() ? "" : ", ") + what;
    }
    ++count;
  }
  std::string detail = "non-finite values in buffer " + first;
  if (count > 1) {
    detail += "; also in " + others + (count > 9 ? " and " + std::to_string(count - 9) + " more" : "");
  }
  return detail + "; the forward pass wrote them, so skipping the update does not undo them (eval mode and "
                  "checkpoints from now on use them)";
}

Probe::Probe(torch::nn::Module& model, torch::optim::Optimizer& optimizer, ProbeOptions options)
    : impl_(std::make_unique<Impl>(model, named_params(model, optimizer), optimizer, std::move(options))) {}

Probe::Impl::~Impl() {
  // A dump still being written when the job ends is finished, and its outcome (a failure
  // above all) goes out as an event before the publisher's last drain: a step would have
  // reported it, and there is no next step.
  try {
    settle_pending();
    dumps_->finish();
    events_.clear();
    events_published_ = 0;
    report_finished_dumps();
    if (publisher_) {
      for (const auto& e : events_) publisher_->publish(e);
    }
  } catch (const std::exception&) {
    // Ending the job must not throw; the dump itself is on disk (or its failure is lost).
  }
}

Probe::~Probe() = default;

void Probe::use_scaler(GradScaler* scaler) { impl_->scaler_ = scaler; }

void Probe::watch(const std::string& name, const torch::Tensor& tensor) { impl_->watch(name, tensor); }

StepOutcome Probe::step(const torch::Tensor& loss) { return impl_->step(loss); }

void Probe::settle() { impl_->settle_pending(); }
const StepOutcome& Probe::last_settled() const { return impl_->last_settled_; }

const wire::StepRecord& Probe::last_record() const { return impl_->record_; }
const wire::RunDescription& Probe::description() const { return impl_->description_; }
const std::vector<wire::Event>& Probe::last_events() const { return impl_->events_; }
const ProbeTiming& Probe::last_timing() const { return impl_->timing_; }
uint64_t Probe::dropped() const { return impl_->publisher_ ? impl_->publisher_->dropped() : 0; }
std::string Probe::bound_endpoint() const {
  return impl_->publisher_ ? impl_->publisher_->bound_endpoint() : std::string();
}
std::string Probe::bound_command_endpoint() const {
  return impl_->commands_ ? impl_->commands_->bound_endpoint() : std::string();
}

}  // namespace keel::probe
