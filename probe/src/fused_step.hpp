// FusedOptimizerStep: the step of a torch::optim::AdamW, Adam or SGD taken by ATen's fused
// CUDA kernels (at::_fused_adamw_, _fused_adam_, _fused_sgd_), which read a found_inf on the
// device and leave everything untouched when it is 1, so a step the probe judged unsafe
// there is skipped with no host sync.
//
// What it is for: the probe's deferred step (probe.cpp): the gradient pass writes the verdict,
// this step reads it, and the host learns the outcome a step later.
// The user's optimizer state stays what libtorch's own step makes of it, so torch::save,
// torch::load and the user's code see no difference:
//   - missing state is created as libtorch creates it (zeros, step 0);
//   - the moments and momentum buffers are the state's own tensors, updated in place;
//   - the step count, a host int64 in libtorch, is counted when the step is enqueued and taken
//     back by settle(false) once the verdict says the device skipped it. Between the two
//     (until the next probe.step() or Probe::settle()), a skipped step is counted once too many.
//   - each step's counts reach the kernel through a small device tensor uploaded from pinned
//     memory, never a tensor kept beside the state.
// The arithmetic is ATen's fused one: the same formulas as libtorch's step, with fp32 bias
// corrections on the device, so weights agree to fp32 rounding, not bit for bit.
// Threads: the training thread. Never: synchronises with the device.
#pragma once

#include <string>
#include <vector>

#include <torch/torch.h>

namespace keel::probe {

class FusedOptimizerStep {
 public:
  // Whether this libtorch has the fused kernels (2.3 and later).
  static bool available();
  // Whether `optimizer`'s next step can be taken here: AdamW, Adam or SGD; every parameter with
  // a gradient a dense CUDA tensor on `device_index` of fp32, fp64, bf16 or fp16 with a gradient of its
  // type; SGD with momentum only once its buffers exist (its first step is libtorch's own); no tensor
  // listed twice. When not, `why` says what stands in the way.
  static bool supports(torch::optim::Optimizer& optimizer, int device_index, std::string& why);

  // Enqueues the step, skipped on the device when found_inf (float32, one element, on the
  // parameters' device) is 1. Throws std::runtime_error where supports() would say no.
  void step(torch::optim::Optimizer& optimizer, const torch::Tensor& found_inf);
  // The verdict of the last step() arrived: `applied` false takes its step counts back.
  void settle(bool applied);

 private:
  std::vector<torch::Tensor> counted_;   // parameters whose state step was counted, last step()
  torch::optim::Optimizer* optimizer_ = nullptr;
};

}  // namespace keel::probe
