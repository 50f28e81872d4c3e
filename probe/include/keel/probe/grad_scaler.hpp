// GradScaler: dynamic loss scaling for libtorch, with PyTorch's semantics and defaults.
//
// What it is for: libtorch has no C++ GradScaler. This one follows torch.cuda.amp.GradScaler:
// scale(loss) before backward; unscale_(optimizer) divides the gradients by the scale and
// records whether any is non-finite; step(optimizer) skips the update when one was; update()
// backs the scale off (x0.5) after an overflow and grows it (x2) after `growth_interval`
// clean steps, keeping the scale a float32 as PyTorch does.
// Used alone, unscale_() unscales CUDA gradients with ATen's
// _amp_foreach_non_finite_check_and_unscale_ (one wait to read found_inf) and CPU gradients one
// tensor at a time (libtorch 1.13 has no CPU kernel for it).
// When used with keel::probe::Probe, call probe.step() instead of scaler.step()/update(): the
// probe unscales in the same pass that computes its statistics (the fused CPU pass, the fused
// CUDA kernel, or a per-layer multiply on its generic path), then steps and updates.
// Threads: the training thread only. Never: throws from step()/update() on non-finite values.
#pragma once

#include <cstdint>

#include <torch/torch.h>

namespace keel::probe {

struct GradScalerOptions {
  double init_scale = 65536.0;   // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  bool enabled = true;
};

class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {});

  torch::Tensor scale(const torch::Tensor& loss) const;
  // Divides every gradient of `optimizer` by the scale, once per step.
  void unscale_(torch::optim::Optimizer& optimizer);
  // Unscales if not yet done, then steps unless a gradient was non-finite. Returns applied.
  bool step(torch::optim::Optimizer& optimizer);
  // Adjusts the scale from this step's found_inf (PyTorch's _amp_update_scale_) and rearms.
  void update();

  // The probe's fused pass unscaled the gradients itself and found `found_inf`.
  void mark_unscaled(bool found_inf);
  bool unscaled() const { return unscaled_; }

  bool enabled() const { return options_.enabled; }
  float scale_value() const { return scale_; }
  float inv_scale_value() const { return 1.0f / scale_; }
  int32_t growth_tracker() const { return growth_tracker_; }
  bool found_inf() const { return found_inf_; }
  int64_t skipped_total() const { return skipped_total_; }
  const GradScalerOptions& options() const { return options_; }

 private:
  GradScalerOptions options_;
  float scale_;
  int32_t growth_tracker_ = 0;
  bool found_inf_ = false;
  bool unscaled_ = false;
  int64_t skipped_total_ = 0;
};

}  // namespace keel::probe
