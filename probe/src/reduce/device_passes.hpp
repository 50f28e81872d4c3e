// DeviceGradPass and DeviceUpdatePass: the probe's passes over the layers on one CUDA device,
// from the fused multi-tensor kernels (cuda/multi_tensor_stats.hpp), in halves so the host
// waits at most once, and not at all when it collects a step later.
//
// What they are for: CudaFusedReductions hands a pass the tensors of the layers that live on
// one device. enqueue() puts the work on libtorch's current stream of that device and returns at
// once: the tables (uploaded only when the layout or a pointer changed) and the pass. The
// gradient pass's finish() then enqueues the step's verdict when asked for, one asynchronous
// copy of the results into pinned host memory, and an event; between enqueue() and finish()
// the caller may enqueue its own copies on the same stream (the loss), which the event then
// covers. collect() hands the results over, waiting on the event only when it has not passed;
// such a wait is reported to c10's sync debug mode like any host sync.
//   DeviceGradPass: per gradient, the statistics of stats_math.hpp, with the scaler's unscale
//     fused in.
//   DeviceUpdatePass: per weight, after the optimizer's step, |dW|^2, |W_old|^2 and |W_new|^2
//     rebuilt from the optimizer's state (update_rules.hpp), with no copy of the weights.
// Built only where libtorch has CUDA and nvcc is found (KEEL_PROBE_CUDA in probe/CMakeLists.txt);
// elsewhere the factories return nullptr and those layers go to GenericReductions.
// Threads: the training thread. Never: changes a tensor but by the unscale asked for.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include <torch/torch.h>

#include "keel/probe/fused_reduce.hpp"
#include "update_rules.hpp"

namespace keel::probe {

// What the step's verdict reads besides the gradient pass's results (cuda/step_verdict.hpp).
struct VerdictRequest {
  torch::Tensor loss;   // float32, one element, on the pass's device; undefined: no loss
  double max_sumsq = 0;   // the bound on the global sum of squares (FLT_MAX, the spike bound, or +Inf)
  // Called on the training thread right after the verdict is enqueued, with whether a
  // gradient value was non-finite (float32, one element, on the device: 1 or 0). What it
  // enqueues on the current stream comes before the results' event, so collect() covers it:
  // a loss scaler's update on the device (GradScaler::enqueue_device_update).
  std::function<void(const torch::Tensor& gradients_nonfinite)> after_verdict;
};

class DeviceGradPass {
 public:
  virtual ~DeviceGradPass() = default;
  // Enqueues the pass over `grads` (each accepted by device_pass_accepts, all on this pass's
  // device); with unscale != 1 each is first multiplied by it in place. Throws
  // std::runtime_error with CUDA's message when a launch fails.
  virtual void enqueue(const std::vector<torch::Tensor>& grads, float unscale) = 0;
  // After enqueue: with `verdict`, enqueues the step's verdict (found_inf()); then the
  // results' copy to the host and the event collect() waits on.
  virtual void finish(const VerdictRequest* verdict) = 0;
  // The last finish's verdict on the device: float32, one element, 1 to skip, 0 to apply.
  virtual torch::Tensor found_inf() const = 0;
  // The last finish's results; out[k] is grads[k]'s statistics. Waits only if they are not in.
  virtual void collect(std::vector<GradStats>& out) = 0;
  // After collect: the verdict's value, as the device decided it.
  virtual float collected_found_inf() const = 0;
};

struct UpdateStats {
  double update_sumsq = 0;   // |W_new - W_old|^2
  double old_sumsq = 0;      // |W_old|^2
  double new_sumsq = 0;      // |W_new|^2
};

class DeviceUpdatePass {
 public:
  virtual ~DeviceUpdatePass() = default;
  // Enqueues the pass over `weights` after the optimizer's step, rules[k] saying how
  // weights[k]'s update is rebuilt (its state tensors of the weight's type and device).
  // Throws std::runtime_error when a rule's tensors do not match its weight or a launch fails.
  // The copy of the results and the event are enqueued with the pass.
  virtual void enqueue(const std::vector<torch::Tensor>& weights, const std::vector<const LayerUpdateRule*>& rules) = 0;
  // The last enqueue's results. Waits only if they are not in.
  virtual void collect(std::vector<UpdateStats>& out) = 0;
};

// A watched tensor's statistics from the fused watch kernel (cuda/watch_stats.hpp).
struct WatchResult {
  double absmax = 0;
  double sumsq = 0;
  double lse_sum = 0;      // sum over rows of log-sum-exp over the last dimension
  int64_t nonfinite = 0;
};

class DeviceWatch {
 public:
  virtual ~DeviceWatch() = default;
  // Enqueues the pass over `t` (accepted by device_watch_accepts), the copy of its result to
  // the host and an event; returns at once. Throws std::runtime_error when the launch fails.
  virtual void enqueue(const torch::Tensor& t) = 0;
  // The last enqueue's result; waits only if it has not arrived.
  virtual WatchResult collect() = 0;
};

// Passes for CUDA device `device_index`, or nullptr where keel was built without the CUDA probe.
std::unique_ptr<DeviceGradPass> make_device_grad_pass(int device_index);
std::unique_ptr<DeviceUpdatePass> make_device_update_pass(int device_index);
std::unique_ptr<DeviceWatch> make_device_watch(int device_index);

// Whether the watch kernel can read this tensor: built with the CUDA probe, a dense,
// contiguous CUDA tensor of fp32, fp64, bf16 or fp16 with a last dimension of at least one
// element and at most 2^31 - 1 rows.
bool device_watch_accepts(const torch::Tensor& t);

// Whether the fused CUDA passes can read this tensor: built with the CUDA probe, a dense,
// contiguous CUDA tensor of fp32, fp64, bf16 or fp16.
bool device_pass_accepts(const torch::Tensor& t);

}  // namespace keel::probe
