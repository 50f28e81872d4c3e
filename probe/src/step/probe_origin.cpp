// Probe::Impl's answer to "where was the NaN born, and why": the closure form's re-run of an
// unsafe step with the origin tracer armed, and the cause of each unsafe step (DESIGN §2.1).
#include <algorithm>
#include <cmath>

#include "origin/origin_tracer.hpp"
#include "probe_impl.hpp"

namespace keel::probe {
namespace {

std::vector<c10::Device> cuda_devices_of(const std::vector<torch::Tensor>& params) {
  std::vector<c10::Device> devices;
  for (const torch::Tensor& p : params) {
    if (!p.is_cuda()) continue;
    if (std::find(devices.begin(), devices.end(), p.device()) == devices.end()) devices.push_back(p.device());
  }
  return devices;
}

}  // namespace

StepOutcome Probe::Impl::step(const LossClosure& closure) {
  const auto start = Clock::now();
  try {
    // Every buffer, integer ones too: BatchNorm counts its batches in num_batches_tracked.
    model_->buffers(rerun_buffers_);
    rerun_point_.capture(rerun_buffers_, cuda_devices_of(params_));
  } catch (const std::exception& e) {
    rerun_point_ = RerunPoint{};
    report_probe_error("saving the random state and buffers a re-run needs", e.what(),
                       "an unsafe step is not run again to find where its NaN was born", step_);
  }
  // Counted as the probe's time on the training thread, with the step's own.
  watch_us_ += micros(Clock::now() - start);
  const torch::Tensor loss = closure();   // the user's exceptions are theirs
  closure_ = &closure;
  struct Forget {
    const LossClosure*& closure;
    ~Forget() { closure = nullptr; }
  } forget{closure_};
  return step(loss);
}

void Probe::Impl::trace_origin_if_due(const Reduction& r, const StepOutcome& outcome) {
  origin_.reset();
  not_traced_ = closure_ == nullptr ? kPlainStepAdvice : "";
  if (closure_ == nullptr || !r.stats_ok) return;
  // A sharded model's forward and backward are collectives: run again on the ranks that saw
  // the NaN only, they would wait for the others forever.
  if (skip_agreement_) {
    not_traced_ = "a sharded job's step is not run again (its collectives would wait for the other ranks)";
    return;
  }
  // Only where an op may be at fault, and once per run of unsafe steps: a NaN that persists
  // must not double every step's cost. A scaled gradient overflowing with a finite loss is the
  // loss scaler's business.
  // With several ranks, a re-run runs the model's collectives (DDP's all-reduce in backward):
  // it must start on every rank or on none. The all-reduced gradients are every rank's; the
  // loss is this rank's own, and alone it starts none.
  const bool nonfinite_values = health_.nonfinite_layers > 0 || (health_.loss_nonfinite && loss_is_the_jobs());
  const bool scaler_overflow = r.scaler_found_inf && std::isfinite(r.loss);
  if (!nonfinite_values || scaler_overflow || nonfinite_last_step_) return;
  if (!rerun_point_.captured()) {
    not_traced_ = "its re-run could not be prepared (a probe_error says why)";
    return;
  }
  RerunPoint as_left;   // the random state and buffers as the first run left them
  std::vector<torch::Tensor> grads;
  bool restore_due = false;
  try {
    const std::vector<c10::Device> devices = cuda_devices_of(params_);
    as_left.capture(rerun_buffers_, devices);
    // An update that will be applied must see the first run's gradients, whatever the re-run makes.
    if (outcome.applied) {
      torch::NoGradGuard no_grad;
      for (const torch::Tensor& p : params_) grads.push_back(p.grad().defined() ? p.grad().clone() : torch::Tensor());
    }
    restore_due = true;
    rerun_point_.restore();
    // The buffers that held a NaN or Inf when planned are so by design (a mask's -inf).
    std::vector<at::Tensor> by_design;
    for (const torch::Tensor& b : buffers_.all().tensors) {
      const auto& watched = buffers_.watched().tensors;
      const bool is_watched = std::any_of(watched.begin(), watched.end(),
                                          [&](const torch::Tensor& w) { return w.is_same(b); });
      if (!is_watched) by_design.push_back(b);
    }
    OriginTracer::NamedTensors parameters, buffers;
    for (size_t i = 0; i < params_.size(); ++i) parameters.emplace_back(names_[i], params_[i]);
    const ModelBuffers& all = buffers_.all();
    for (size_t i = 0; i < all.tensors.size(); ++i) buffers.emplace_back(all.names[i], all.tensors[i]);
    OriginTracer tracer(parameters, buffers, std::move(by_design));
    rerunning_ = true;
    struct Done {
      bool& flag;
      ~Done() { flag = false; }
    } done{rerunning_};
    origin_ = tracer.trace([this] { (*closure_)(); });
  } catch (const std::exception& e) {
    origin_.reset();
    not_traced_ = "its re-run failed (a probe_error says why)";
    report_probe_error("running the step again to find where its NaN was born", e.what(),
                       "its cause is told from the first run alone");
  }
  if (!restore_due) return;
  try {
    as_left.restore();
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < grads.size(); ++i) params_[i].mutable_grad() = grads[i];
  } catch (const std::exception& e) {
    report_probe_error("restoring the state after the step's re-run", e.what(),
                       "the random state or buffers may be the re-run's");
  }
}

void Probe::Impl::classify(const StepPlan& plan, const Reduction& r) {
  cause_.reset();
  recent_lrs_.emplace_back(record_step_, record_.lr);
  if (recent_lrs_.size() > static_cast<size_t>(kLrJumpWindow) + 1) recent_lrs_.erase(recent_lrs_.begin());
  if (!r.stats_ok) return;
  StepEvidence e;
  e.step = record_step_;
  e.health = &health_;
  e.loss = r.loss;
  e.has_loss = !std::isnan(r.loss) || health_.loss_nonfinite;
  e.grads = &reducer_.grad_stats();
  e.names = &names_;
  if (plan.param_due && reducer_.param_sumsq().size() == names_.size()) e.weight_sumsq = &reducer_.param_sumsq();
  e.scaler_overflow = r.scaler_found_inf;
  e.scale = r.scale > 0 ? r.scale : (scaler_ ? scaler_->scale_value() : 0.0);
  e.spike = spike_verdict_.spike && std::isfinite(spike_verdict_.z);
  e.spike_z = spike_verdict_.z;
  e.spike_window = spike_verdict_.compared_with;
  e.lr_jump = latest_lr_jump(recent_lrs_, record_step_);
  e.origin = origin_;
  e.not_traced = not_traced_;
  cause_ = classify_cause(e);
}

}  // namespace keel::probe
