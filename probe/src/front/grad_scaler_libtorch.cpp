// GradScaler used alone with a libtorch optimizer (unscale_, step): the C++ front's part of the
// scaler, the only one that names torch::optim. What the probe's step drives (the scale, its
// update, the step's verdicts) is step/grad_scaler.cpp.
#include <vector>

#include "keel/probe/grad_scaler.hpp"

namespace keel::probe {

void GradScaler::unscale_(torch::optim::Optimizer& optimizer) {
  if (!options_.enabled) return;
  // A deferred step's update of the scale not yet settled: this step's loss was scaled by its
  // result, not by the host's value. Read it now (a wait; reading found_inf below is one too).
  if (device_update_pending_) settle_device_update();
  if (unscaled_) return;
  torch::NoGradGuard no_grad;
  const float inv_scale = inv_scale_value();
  bool found_inf = false;
  std::vector<torch::Tensor> cuda_grads;
  for (auto& group : optimizer.param_groups()) {
    for (auto& param : group.params()) {
      auto& grad = param.mutable_grad();
      if (!grad.defined()) continue;
      if (grad.is_cuda()) {
        cuda_grads.push_back(grad);
        continue;
      }
      grad.mul_(inv_scale);
      if (!found_inf && !torch::isfinite(grad).all().item<bool>()) found_inf = true;
    }
  }
  if (!cuda_grads.empty()) {
    const auto device = cuda_grads.front().device();
    auto found = torch::zeros({1}, torch::TensorOptions().dtype(torch::kFloat).device(device));
    auto inv = torch::full({1}, inv_scale, torch::TensorOptions().dtype(torch::kFloat).device(device));
    // ATen's fused unscale takes fp32, fp64 and fp16 only (bf16 throws "not implemented", seen
    // on an H100): other gradients are unscaled one by one, their check folded into `found`.
    std::vector<torch::Tensor> fused;
    for (auto& grad : cuda_grads) {
      if (grad.scalar_type() == torch::kFloat || grad.scalar_type() == torch::kDouble || grad.scalar_type() == torch::kHalf) {
        fused.push_back(grad);
      } else {
        grad.mul_(inv);
        found.add_(torch::isfinite(grad).logical_not().any().to(torch::kFloat).reshape({1}));
      }
    }
    if (!fused.empty()) at::_amp_foreach_non_finite_check_and_unscale_(fused, found, inv);
    found_inf = found_inf || found.item<float>() != 0.0f;
  }
  mark_unscaled(found_inf);
}

bool GradScaler::step(torch::optim::Optimizer& optimizer) {
  if (!options_.enabled) {
    optimizer.step();
    return true;
  }
  unscale_(optimizer);
  if (found_inf_) return false;
  optimizer.step();
  return true;
}

}  // namespace keel::probe
