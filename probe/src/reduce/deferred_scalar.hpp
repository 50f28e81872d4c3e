// DeferredScalar: a one-element tensor's value (the loss), read without a host sync of its own.
//
// What it is for: loss.item() on a CUDA tensor waits for the device. When the probe is about to
// wait on that device's current stream anyway (the fused gradient pass's one wait), start()
// enqueues an asynchronous copy into pinned memory on that stream and value() reads it after
// the wait. Otherwise start() reads the value at once.
// Threads: the training thread. Never: waits on the device when `piggyback` is true.
#pragma once

#include <torch/torch.h>

namespace keel::probe {

class DeferredScalar {
 public:
  // `piggyback`: the caller synchronises the current stream of t's device before value().
  void start(const torch::Tensor& t, bool piggyback);
  double value() const;

 private:
  torch::Tensor pinned_;
  bool deferred_ = false;
  double value_ = 0;
};

}  // namespace keel::probe
