// PlannedTensorCheck: a check of each planned parameter that the gradient walk makes on its
// way to the parameter's gradient.
//
// What it is for: every step compares each parameter with the layer it was planned for (its
// device, type and shape: ParameterLayout). On a model of 50,000 tensors that comparison is a
// walk of its own over TensorImpls that backward has pushed out of cache, and the gradient
// walk reads the same TensorImpls again. Asked by the gradient walk instead, it reads them
// once. The walk asks before any backend's pass writes a gradient (an unscale writes in
// place), so a tensor that left its plan stops the walk with every gradient untouched.
// Threads: the training thread. Never: throws.
#pragma once

#include <cstddef>

#include <torch/torch.h>

namespace keel::probe {

class PlannedTensorCheck {
 public:
  virtual ~PlannedTensorCheck() = default;
  // False: `param`, the planned tensor of `layer`, is no longer on the device, of the type or
  // of the shape its layer was planned for.
  virtual bool still_planned(size_t layer, const torch::Tensor& param) = 0;
};

}  // namespace keel::probe
