// CudaFusedReductions: the reductions of the layers on CUDA devices, one fused launch per
// device per pass (device_passes.hpp), and the step's verdict on the device.
//
// What it is for: the CUDA backend of ReductionBackend. It takes dense, contiguous CUDA
// tensors of fp32, fp64, bf16 or fp16 (device_pass_accepts). Its passes are enqueued on
// libtorch's current stream and read behind an event, so collecting waits only where the
// results have not arrived. When the optimizer's update can be rebuilt from its state
// (AdamW, Adam, SGD: update_rules.hpp), it measures the update with no copy of the weights;
// otherwise it leaves those layers' updates to the generic backend's copy. Where keel is
// built without the CUDA probe, device_pass_accepts is false and it takes no layer.
// Threads: the training thread only.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "device_passes.hpp"
#include "reduction_backend.hpp"

namespace keel::probe {

class CudaFusedReductions final : public ReductionBackend {
 public:
  explicit CudaFusedReductions(const std::vector<torch::Tensor>& params);
  // The optimizer whose step the update pass measures; nullptr, or one without update rules
  // (or stepping a tensor twice, which one rule would report as half): no rebuilt updates.
  void measure_updates_of(const OptimizerAdapter* optimizer);

  void begin_grads(float unscale) override;
  bool take_grad(size_t layer, const torch::Tensor& grad) override;
  void enqueue_grads(float unscale) override;
  // After enqueue_grads, and after whatever the caller put on the stream in between (the
  // loss's copy): with `verdict`, the step's verdict; then each device's results' copy and
  // event. The verdict folds one pass's results, so it needs every gradient of the step in
  // one device's pass: std::logic_error, with nothing enqueued, when another backend measured
  // some (`gradients_elsewhere`) or the last enqueue_grads spanned several devices.
  void finish_grads(const VerdictRequest* verdict, bool gradients_elsewhere);
  void collect_grads(LayerSums& out) override;
  // The one device whose pass holds every gradient of the last enqueue_grads; -1 when there
  // is none or there are several.
  int sole_device() const;
  // Whether the last enqueue_grads put a pass on this device.
  bool pass_on(int device_index) const;
  // The last finish_grads' verdict on its device (float32, one element, 1: unsafe), and,
  // after collect_grads, its value. std::logic_error when that finish asked for none.
  torch::Tensor found_inf() const;
  float collected_found_inf() const;

  // A layer on a device is taken for its norm always, and for its update only when the
  // update can be rebuilt.
  bool takes_weights(size_t layer, bool for_update) const override;
  // On the same stream as the gradient pass: enqueued before finish_grads, the wait for the
  // gradients' results covers these too (one wait for a host-decided step).
  void enqueue_weights(const std::vector<size_t>& layers, bool for_update) override;
  void collect_weights(LayerSums& out) override;
  void enqueue_updates(const std::vector<size_t>& layers) override;
  // A rebuilt update also gives |W_old|^2, which replaces the norm taken before the step. A
  // skipped update (applied false) moved by nothing: the rule, read before the verdict was
  // known, describes an update that never happened.
  void collect_updates(bool applied, LayerSums& out) override;

 private:
  // The layers of one device in a pass, and their tensors, held until the pass is collected.
  struct Batch {
    std::vector<size_t> layers;
    std::vector<torch::Tensor> tensors;
    void clear() {
      layers.clear();
      tensors.clear();
    }
    void add(size_t layer, const torch::Tensor& t) {
      layers.push_back(layer);
      tensors.push_back(t);
    }
  };
  // Per CUDA device index: its passes, created on first use, each with a batch of its own: a
  // deferred step's gradient results are collected after its update pass was enqueued.
  struct Device {
    std::unique_ptr<DeviceGradPass> grads_pass;
    std::unique_ptr<DeviceGradPass> weights_pass;   // sum w^2: the gradient kernel, read-only
    std::unique_ptr<DeviceUpdatePass> updates_pass;
    Batch grads, weights, updates;
  };
  Device& device_of(const torch::Tensor& t) { return devices_[t.device().index()]; }

  std::vector<torch::Tensor> params_;
  LayerIndex layers_;   // which layer each parameter is, for the update rules
  std::map<int, Device> devices_;
  const OptimizerAdapter* rebuild_from_ = nullptr;   // set when its updates can be rebuilt
  int verdict_device_ = -1;   // the device of the last finish_grads' verdict, -1: none
  std::vector<size_t> taken_grads_;   // since the last enqueue_grads

  // Scratch reused every step.
  std::vector<LayerUpdateRule> rules_;
  std::vector<const LayerUpdateRule*> device_rules_;
  std::vector<GradStats> grad_out_;
  std::vector<UpdateStats> update_out_;
};

}  // namespace keel::probe
