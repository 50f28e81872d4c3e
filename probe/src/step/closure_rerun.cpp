// ClosureRerun: the state a re-run needs saved, and an unsafe step run again with the origin
// tracer armed.
#include "closure_rerun.hpp"

#include <algorithm>
#include <cmath>

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

void ClosureRerun::prepare(TrainedModel& model, const std::vector<torch::Tensor>& params, StepEvents& events,
                           int64_t step) {
  try {
    model.buffers(rerun_buffers_);
    rerun_point_.capture(rerun_buffers_, cuda_devices_of(params));
  } catch (const std::exception& e) {
    rerun_point_ = RerunPoint{};
    events.add_probe_error(step, "saving the random state and buffers a re-run needs", e.what(),
                           "an unsafe step is not run again to find where its NaN was born");
  }
}

void ClosureRerun::trace_if_due(const Verdict& v, const Model& model, StepEvents& events, int64_t step) {
  origin_.reset();
  not_traced_ = closure_ == nullptr ? kPlainStepAdvice : "";
  if (closure_ == nullptr || !v.measured) return;
  // A sharded model's forward and backward are collectives: run again on the ranks that saw
  // the NaN only, they would wait for the others forever.
  if (v.sharded) {
    not_traced_ = "a sharded job's step is not run again (its collectives would wait for the other ranks)";
    return;
  }
  // Only where an op may be at fault, and once per run of unsafe steps: a NaN that persists
  // must not double every step's cost. A scaled gradient overflowing with a finite loss is the
  // loss scaler's business.
  // With several ranks, a re-run runs the model's collectives (DDP's all-reduce in backward):
  // it must start on every rank or on none. The all-reduced gradients are every rank's; the
  // loss is this rank's own, and alone it starts none.
  const bool nonfinite_values =
      v.health->nonfinite_layers > 0 || (v.health->loss_nonfinite && v.loss_is_the_jobs);
  const bool scaler_overflow = v.scaler_found_inf && std::isfinite(v.loss);
  if (!nonfinite_values || scaler_overflow || v.nonfinite_last_step) return;
  if (!rerun_point_.captured()) {
    not_traced_ = "its re-run could not be prepared (a probe_error says why)";
    return;
  }
  RerunPoint as_left;   // the random state and buffers as the first run left them
  std::vector<torch::Tensor> grads;
  bool restore_due = false;
  try {
    const std::vector<c10::Device> devices = cuda_devices_of(model.params);
    as_left.capture(rerun_buffers_, devices);
    // An update that will be applied must see the first run's gradients, whatever the re-run makes.
    if (v.applied) {
      torch::NoGradGuard no_grad;
      for (const torch::Tensor& p : model.params) grads.push_back(p.grad().defined() ? p.grad().clone() : torch::Tensor());
    }
    restore_due = true;
    rerun_point_.restore();
    // The buffers that held a NaN or Inf when planned are so by design (a mask's -inf).
    std::vector<at::Tensor> by_design;
    for (const torch::Tensor& b : model.buffers.all().tensors) {
      const auto& watched = model.buffers.watched().tensors;
      const bool is_watched = std::any_of(watched.begin(), watched.end(),
                                          [&](const torch::Tensor& w) { return w.is_same(b); });
      if (!is_watched) by_design.push_back(b);
    }
    OriginTracer::NamedTensors parameters, buffers;
    for (size_t i = 0; i < model.params.size(); ++i) parameters.emplace_back(model.names[i], model.params[i]);
    const ModelBuffers& all = model.buffers.all();
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
    events.add_probe_error(step, "running the step again to find where its NaN was born", e.what(),
                           "its cause is told from the first run alone");
  }
  if (!restore_due) return;
  try {
    as_left.restore();
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < grads.size(); ++i) model.params[i].mutable_grad() = grads[i];
  } catch (const std::exception& e) {
    events.add_probe_error(step, "restoring the state after the step's re-run", e.what(),
                           "the random state or buffers may be the re-run's");
  }
}

}  // namespace keel::probe
