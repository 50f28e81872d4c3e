// FusedOptimizerStep: the step of a torch::optim::AdamW, Adam or SGD taken by ATen's fused
// kernels (at::_fused_adamw_, _fused_adam_, _fused_sgd_), which read a found_inf on the
// parameters' device and leave everything untouched when it is 1, so a step the probe judged
// unsafe on a CUDA device is skipped there with no host sync.
//
// What it is for: the C++ front's deferred step (LibtorchOptimizer::deferred_step, called from
// probe_deferred.cpp): the gradient pass writes the verdict, this step reads it, and the host
// learns the outcome a step later. The probe uses it on CUDA
// devices only; libtorch 2.4 and later also have the kernels for CPU tensors, where keel's tests
// check this class on machines without a GPU.
// The user's optimizer state stays what libtorch's own step makes of it, so torch::save,
// torch::load and the user's code see no difference:
//   - missing state is created as libtorch creates it: Adam's zeros and step 0; SGD's momentum
//     buffer, which libtorch's first step makes a copy of the gradient, is made by the kernel's
//     first-step mode from a zeroed tensor;
//   - the moments and momentum buffers are the state's own tensors, updated in place;
//   - the step count, a host int64 in libtorch, is counted when the step is enqueued. Once the
//     verdict says the device skipped the step, settle(false) takes the counts back and removes
//     the state the step created, leaving the state as it was. Between the two (until the next
//     probe.step() or Probe::settle()), a skipped step is counted once too many and its new
//     state holds zeros.
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
  // a gradient a dense tensor on `device` (a CUDA device; the CPU from libtorch 2.4 on) of fp32,
  // fp64, bf16 or fp16, its gradient and any state it has laid out as it; no tensor listed
  // twice. When not, `why` says what stands in the way.
  static bool supports(torch::optim::Optimizer& optimizer, const torch::Device& device, std::string& why);

  // Enqueues the step, skipped on the device when found_inf (float32, one element, on the
  // parameters' device) is 1. Where supports() would say no, throws std::runtime_error before
  // anything is counted, created or enqueued, so libtorch's own step can be taken instead; a
  // failure while the step is prepared (out of memory for new state) is taken back the same
  // way. Only a failure of the kernels' launch itself (a broken device) throws with enqueued().
  void step(torch::optim::Optimizer& optimizer, const torch::Tensor& found_inf);
  // Whether the last step() enqueued kernels: a part of it may be taken, to be settled by its
  // verdict, and libtorch's own step must not follow.
  bool enqueued() const { return enqueued_; }
  // The verdict of the last step() arrived: `applied` false takes its step counts back and
  // removes the state it created.
  void settle(bool applied);

 private:
  std::vector<torch::Tensor> counted_;   // parameters whose existing state step() counted (Adam, AdamW)
  std::vector<torch::Tensor> created_;   // parameters whose state step() created
  torch::optim::Optimizer* optimizer_ = nullptr;
  bool enqueued_ = false;
};

}  // namespace keel::probe
