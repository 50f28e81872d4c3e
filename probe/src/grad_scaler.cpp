#include "keel/probe/grad_scaler.hpp"

#include <cmath>
#include <vector>

namespace keel::probe {

GradScaler::GradScaler(GradScalerOptions options)
    : options_(options), scale_(static_cast<float>(options.init_scale)) {}

torch::Tensor GradScaler::scale(const torch::Tensor& loss) const {
  if (!options_.enabled) return loss;
  return loss * static_cast<double>(scale_);
}

void GradScaler::unscale_(torch::optim::Optimizer& optimizer) {
  if (!options_.enabled || unscaled_) return;
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
    at::_amp_foreach_non_finite_check_and_unscale_(cuda_grads, found, inv);
    found_inf = found_inf || found.item<float>() != 0.0f;
  }
  mark_unscaled(found_inf);
}

void GradScaler::mark_unscaled(bool found_inf) {
  unscaled_ = true;
  found_inf_ = found_inf;
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

void GradScaler::update() {
  if (!options_.enabled) return;
  // The arithmetic of ATen's _amp_update_scale_, done on the host in float32.
  if (found_inf_) {
    scale_ = scale_ * static_cast<float>(options_.backoff_factor);
    growth_tracker_ = 0;
    ++skipped_total_;
  } else {
    const int32_t successful = growth_tracker_ + 1;
    if (successful == options_.growth_interval) {
      const float grown = scale_ * static_cast<float>(options_.growth_factor);
      if (std::isfinite(grown)) scale_ = grown;
      growth_tracker_ = 0;
    } else {
      growth_tracker_ = successful;
    }
  }
  unscaled_ = false;
}

}  // namespace keel::probe
