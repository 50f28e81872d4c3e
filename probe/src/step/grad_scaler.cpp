// GradScaler as the probe's step drives it: the scale and its update, on the host and deferred on
// a device, and the verdicts the step hands it (keel/probe/grad_scaler.hpp). Its use alone with
// a libtorch optimizer (unscale_, step) is the C++ front's: front/grad_scaler_libtorch.cpp.
#include "keel/probe/grad_scaler.hpp"

#include <cmath>
#include <stdexcept>

namespace keel::probe {

GradScaler::GradScaler(GradScalerOptions options)
    : options_(options), scale_(static_cast<float>(options.init_scale)) {}

torch::Tensor GradScaler::scale(const torch::Tensor& loss) {
  if (!options_.enabled) return loss;
  if (!loss.is_cuda()) return loss * static_cast<double>(scale_);
  if (!device_scale_.defined() || device_scale_.device() != loss.device()) {
    // Created from the host values, which are the truth until a deferred step updates the
    // device's (a scaler moved between devices carries its last settled values).
    const auto on = torch::TensorOptions().device(loss.device());
    device_scale_ = torch::full({}, scale_, on.dtype(torch::kFloat));
    device_growth_tracker_ = torch::full({}, growth_tracker_, on.dtype(torch::kInt));
    const auto pinned = torch::TensorOptions().pinned_memory(true);
    settled_scale_ = torch::empty({}, pinned.dtype(torch::kFloat));
    settled_growth_tracker_ = torch::empty({}, pinned.dtype(torch::kInt));
    settled_found_inf_ = torch::empty({}, pinned.dtype(torch::kFloat));
  }
  // float32 like the scale, as PyTorch's: a half-precision loss times 65,536 would overflow.
  return loss * device_scale_;
}

bool GradScaler::on_device(const torch::Device& device) const {
  return device_scale_.defined() && device_scale_.device() == device;
}

void GradScaler::enqueue_device_update(const torch::Tensor& found_inf) {
  if (!device_scale_.defined() || found_inf.device() != device_scale_.device()) {
    throw std::logic_error("keel: the scaler's scale is not on the device of this update");
  }
  at::_amp_update_scale_(device_scale_, device_growth_tracker_, found_inf, options_.growth_factor,
                         options_.backoff_factor, options_.growth_interval);
  settled_scale_.copy_(device_scale_, /*non_blocking=*/true);
  settled_growth_tracker_.copy_(device_growth_tracker_, /*non_blocking=*/true);
  settled_found_inf_.copy_(found_inf.reshape({}), /*non_blocking=*/true);
  device_update_pending_ = true;
}

bool GradScaler::settle_device_update() {
  if (!device_update_pending_) return device_found_inf_;
  device_update_pending_ = false;
  scale_ = settled_scale_.item<float>();
  growth_tracker_ = settled_growth_tracker_.item<int32_t>();
  device_found_inf_ = settled_found_inf_.item<float>() != 0.0f;
  found_inf_ = device_found_inf_;
  if (found_inf_) ++skipped_total_;
  unscaled_ = false;
  probe_failed_last_ = false;   // the device measured this step: the probe did not fail it
  return device_found_inf_;
}

void GradScaler::load_state(float scale, int32_t growth_tracker) {
  if (device_update_pending_) throw std::logic_error("keel: GradScaler::load_state with a device update to settle");
  scale_ = scale;
  growth_tracker_ = growth_tracker;
  if (device_scale_.defined()) {
    device_scale_.fill_(scale_);
    device_growth_tracker_.fill_(growth_tracker_);
  }
}

void GradScaler::share_state(const torch::Tensor& scale, const torch::Tensor& growth_tracker, float scale_value,
                             int32_t growth_tracker_value) {
  if (device_update_pending_) throw std::logic_error("keel: GradScaler::share_state with a device update to settle");
  const auto one_element = [](const torch::Tensor& t, torch::ScalarType type) {
    return t.defined() && t.scalar_type() == type && t.numel() == 1 && t.layout() == torch::kStrided;
  };
  if (!one_element(scale, torch::kFloat) || !one_element(growth_tracker, torch::kInt) ||
      scale.device() != growth_tracker.device()) {
    throw std::invalid_argument(
        "keel: GradScaler::share_state needs a one-element float32 scale and int32 growth tracker on one device");
  }
  // Views of the same elements, sharing their version counters: what this scaler writes, the
  // other reads, and sees as a write.
  device_scale_ = scale.view(c10::IntArrayRef{});   // not view({}): that is view(ScalarType)
  device_growth_tracker_ = growth_tracker.view(c10::IntArrayRef{});
  if (scale.is_cuda()) {
    const auto pinned = torch::TensorOptions().pinned_memory(true);
    settled_scale_ = torch::empty({}, pinned.dtype(torch::kFloat));
    settled_growth_tracker_ = torch::empty({}, pinned.dtype(torch::kInt));
    settled_found_inf_ = torch::empty({}, pinned.dtype(torch::kFloat));
  }
  scale_ = scale_value;
  growth_tracker_ = growth_tracker_value;
}

void GradScaler::mark_unscaled(bool found_inf) {
  unscaled_ = true;
  found_inf_ = found_inf;
}

void GradScaler::mark_probe_failed() {
  mark_unscaled(/*found_inf=*/true);
  probe_failed_ = true;
}

void GradScaler::take_agreed_verdict(bool found_inf, bool probe_failed) {
  mark_unscaled(found_inf);
  probe_failed_ = probe_failed;
}

void GradScaler::update() {
  if (!options_.enabled) return;
  // The arithmetic of ATen's _amp_update_scale_, on the host: the float32 scale times the
  // double factor, in double, rounded to float32 (the same value for 2 and 0.5; for other
  // factors a float32 product would differ by an ulp in about a third of the steps).
  if (found_inf_) {
    if (!(probe_failed_ && probe_failed_last_)) {
      scale_ = static_cast<float>(static_cast<double>(scale_) * options_.backoff_factor);
    }
    growth_tracker_ = 0;
    ++skipped_total_;
  } else {
    const int32_t successful = growth_tracker_ + 1;
    if (successful == options_.growth_interval) {
      const float grown = static_cast<float>(static_cast<double>(scale_) * options_.growth_factor);
      if (std::isfinite(grown)) scale_ = grown;
      growth_tracker_ = 0;
    } else {
      growth_tracker_ = successful;
    }
  }
  // The device's copy follows the host's: two fills, enqueued, no wait. They overwrite any
  // device update not yet settled (a deferred step whose settling failed), which must not be
  // read back over this one later.
  device_update_pending_ = false;
  if (device_scale_.defined()) {
    device_scale_.fill_(scale_);
    device_growth_tracker_.fill_(growth_tracker_);
  }
  unscaled_ = false;
  probe_failed_last_ = probe_failed_;
  probe_failed_ = false;
}

}  // namespace keel::probe
