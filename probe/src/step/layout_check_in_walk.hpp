// LayoutCheckInWalk: ParameterLayout's check of each planned tensor, asked by the gradient
// walk (PlannedTensorCheck), which reads the tensor's TensorImpl then anyway.
//
// What it is for: at 50,000 tensors the layout check's own walk over the parameters cost
// about 45 ns a tensor, most of it waiting on TensorImpls that backward had pushed out of
// cache, and the gradient walk waited on the same lines again (PlannedLayers::follow).
// Threads: the training thread. Never: throws.
#pragma once

#include "layout/parameter_layout.hpp"
#include "reduce/planned_tensor_check.hpp"

namespace keel::probe {

class LayoutCheckInWalk final : public PlannedTensorCheck {
 public:
  // `compare_values`: as ParameterLayout::unchanged's.
  LayoutCheckInWalk(const ParameterLayout& layout, bool compare_values)
      : layout_(layout), compare_values_(compare_values) {}

  bool still_planned(size_t layer, const torch::Tensor& param) override {
    return layout_.same_tensor(layer, param, compare_values_, weights_written_);
  }
  // After a walk that found every tensor as planned: whether some weight was written since
  // the last step (only with `compare_values`).
  bool weights_written() const { return weights_written_; }

 private:
  const ParameterLayout& layout_;
  const bool compare_values_;
  bool weights_written_ = false;
};

}  // namespace keel::probe
