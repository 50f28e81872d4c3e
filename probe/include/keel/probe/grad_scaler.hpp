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
// The scale on a CUDA device: as PyTorch's GradScaler does, scale() of a loss on a CUDA device
// keeps the scale there too (a float32 and an int32 growth tracker), so scaling reads nothing
// back. The host values stay the truth while the scaler decides on the host (update() writes
// them to the device without a wait). A probe step deferred on that device updates them there
// instead (enqueue_device_update) and hands the result back when the step settles
// (settle_device_update): until then scale_value(), growth_tracker(), found_inf() and
// skipped_total() are those of the step before. unscale_() between the two (to clip the
// gradients, say) settles that update first, with a wait: the gradients it divides were
// scaled by the device's new scale.
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

  torch::Tensor scale(const torch::Tensor& loss);
  // Divides every gradient of `optimizer` by the scale, once per step.
  void unscale_(torch::optim::Optimizer& optimizer);
  // Unscales if not yet done, then steps unless a gradient was non-finite. Returns applied.
  bool step(torch::optim::Optimizer& optimizer);
  // Adjusts the scale from this step's found_inf (PyTorch's _amp_update_scale_) and rearms.
  void update();

  // Takes the scale and growth tracker another scaler holds on the host, and on the device
  // where scale() keeps them there. Between steps only: not with a device update still to
  // settle.
  void load_state(float scale, int32_t growth_tracker);
  // Keeps its scale and growth tracker in another scaler's tensors from now on (the Python
  // front: a torch.amp.GradScaler's _scale and _growth_tracker, one-element float32 and int32
  // tensors on one device), whose values are `scale_value` and `growth_tracker_value`: every
  // update, on the host or (on a CUDA device) deferred on the device, writes them, so the other
  // scaler reads each step's result with no copy back, and on a CUDA device this scaler
  // decides there as if scale() had put its scale there. Between steps only: not with a
  // device update still to settle. Throws std::invalid_argument for tensors it cannot keep
  // them in.
  void share_state(const torch::Tensor& scale, const torch::Tensor& growth_tracker, float scale_value,
                   int32_t growth_tracker_value);

  // The probe's fused pass unscaled the gradients itself and found `found_inf`.
  void mark_unscaled(bool found_inf);
  bool unscaled() const { return unscaled_; }
  // The step was abandoned before update() (its optimizer threw): the next unscale is the next
  // step's, by the scale as it stands.
  void rearm() {
    unscaled_ = false;
    probe_failed_ = false;
  }
  // The probe could not measure this step (its own failure, not the gradients'): the step is
  // skipped as an overflow. Only the first of a run of such steps backs the scale off; the
  // ones after it keep the scale (the growth tracker still restarts), so a probe that keeps
  // failing cannot halve the scale down to zero and leave training dead when it recovers.
  void mark_probe_failed();
  bool probe_failed() const { return probe_failed_; }
  // The ranks of a sharded job agreed on this step's overflow (skip_agreement.hpp): the job's
  // verdict replaces this rank's own, so that every rank's update() starts from the same state
  // and their scales stay equal. After the unscale, before update().
  void take_agreed_verdict(bool found_inf, bool probe_failed);

  // Whether scale() keeps the scale on this CUDA device (it has scaled a loss there).
  bool on_device(const torch::Device& device) const;
  // The probe's deferred step: after its verdict, updates the device's scale from
  // `found_inf` (a float32 one-element tensor on that device, 1 when a gradient was
  // non-finite) with ATen's _amp_update_scale_, the arithmetic of update(), and enqueues the
  // copy of the result to the host. The caller orders an event after it and waits on that
  // event before settle_device_update(). Throws std::logic_error without a scale there.
  void enqueue_device_update(const torch::Tensor& found_inf);
  // After that event: the host values become the device's, and the scaler is rearmed.
  // Returns whether that update's step overflowed. Once per update: a later call (the probe's,
  // after unscale_() settled it first) changes nothing and returns the same.
  bool settle_device_update();

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
  bool probe_failed_ = false;        // this step ends as mark_probe_failed()
  bool probe_failed_last_ = false;   // and so did the step before it
  int64_t skipped_total_ = 0;
  // On a CUDA device once scale() saw a loss there, or another scaler's (share_state, on any
  // device): the scale and growth tracker (zero-dim views), and on a CUDA device the pinned
  // host copies the deferred update is read back through.
  torch::Tensor device_scale_, device_growth_tracker_;
  torch::Tensor settled_scale_, settled_growth_tracker_, settled_found_inf_;
  bool device_update_pending_ = false;   // enqueued, not yet settled
  bool device_found_inf_ = false;        // the last settled device update's overflow
};

}  // namespace keel::probe
