// GenericReductions: the reductions of every layer the fused backends do not take, with ATen
// ops on the tensor's own device.
//
// What it is for: the fallback of ReductionBackend, for strided tensors, other element types,
// sparse gradients (measured by the values they store), devices without a fused pass, and
// layers on a device whose update cannot be rebuilt from the optimizer. Each layer's
// statistics are a small fp64 row computed where the tensor lives; the rows of one device are
// stacked and brought to the host with a single copy per pass (this backend's only
// synchronisation). Its update_ratio compares W with a copy of W on the tensor's device.
// Threads: the training thread only. Never: throws for non-finite values.
#pragma once

#include <vector>

#include "reduction_backend.hpp"

namespace keel::probe {

class GenericReductions final : public ReductionBackend {
 public:
  explicit GenericReductions(const std::vector<torch::Tensor>& params);

  // Takes every layer: it is asked last.
  void begin_grads(float unscale) override;
  bool take_grad(size_t layer, const torch::Tensor& grad) override;
  void enqueue_grads(float unscale) override;
  void collect_grads(LayerSums& out) override;

  bool takes_weights(size_t layer, bool for_update) const override;
  void enqueue_weights(const std::vector<size_t>& layers, bool for_update) override;
  void collect_weights(LayerSums& out) override;
  void enqueue_updates(const std::vector<size_t>& layers) override;
  void collect_updates(bool applied, LayerSums& out) override;

 private:
  std::vector<torch::Tensor> params_;
  std::vector<torch::Tensor> snapshot_;   // per layer, made at its first for_update pass

  // The last enqueue's layers and results, until their collect.
  std::vector<size_t> grad_layers_, weight_layers_, update_layers_;
  std::vector<size_t> taken_grads_;   // since the last enqueue_grads
  std::vector<GradStats> grad_out_;
  std::vector<double> weight_out_, update_out_, next_weight_out_;
};

}  // namespace keel::probe
