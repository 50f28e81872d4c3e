// gradient_slot: a parameter's gradient and requires_grad, read from its autograd metadata.
//
// What it is for: the probe walks to every parameter's gradient each step. Tensor::grad() asks,
// through calls into libtorch on every call, whether the tensor is a leaf that retains its
// gradient (to warn about a non-leaf's missing one), and requires_grad() asks through a
// virtual call. At 2,000 tensors those asks cost more than the reads themselves. A parameter
// is a leaf: its gradient is its AutogradMeta's grad_, which is what Tensor::grad() returns.
// Threads: any, as Tensor::grad(). Never: creates autograd metadata where there is none.
#pragma once

#include <torch/csrc/autograd/variable.h>
#include <torch/torch.h>

namespace keel::probe {

// What the walk to one parameter's gradient finds.
struct GradientSlot {
  // The parameter's gradient slot; nullptr when the parameter has no autograd metadata (it
  // never required grad, so it has no gradient either).
  const torch::Tensor* grad = nullptr;
  bool requires_grad = false;

  bool has_grad() const { return grad != nullptr && grad->defined(); }
};

inline GradientSlot gradient_slot(const torch::Tensor& param) {
  const torch::autograd::AutogradMeta* meta = torch::autograd::impl::get_autograd_meta(param);
  if (meta == nullptr) return {};
  return {&meta->grad_, meta->requires_grad_ || meta->grad_fn_ != nullptr};
}

}  // namespace keel::probe
