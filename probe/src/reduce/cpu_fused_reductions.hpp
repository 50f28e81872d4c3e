// CpuFusedReductions: the reductions of CPU float32 contiguous layers, with FusedReducer's
// hand-fused passes (one parallel region over every layer per pass).
//
// What it is for: the CPU backend of ReductionBackend. Its update_ratio compares W with a
// copy taken before the step: one host buffer for all of its layers, refreshed by the update
// pass itself, so a step with update_ratio due reads W twice and copies it once.
// Threads: the training thread only. Never: allocates once warmed up.
#pragma once

#include <cstdint>
#include <vector>

#include "reduction_backend.hpp"

namespace keel::probe {

class CpuFusedReductions final : public ReductionBackend {
 public:
  explicit CpuFusedReductions(const std::vector<torch::Tensor>& params);

  void begin_grads() override;
  bool take_grad(size_t layer, const torch::Tensor& grad) override;
  void enqueue_grads(float unscale) override;
  void collect_grads(LayerSums& out) override;

  bool takes_weights(size_t layer, bool for_update) const override;
  void enqueue_weights(const std::vector<size_t>& layers, bool for_update) override;
  void collect_weights(LayerSums& out) override;
  void enqueue_updates(const std::vector<size_t>& layers) override;
  void collect_updates(bool applied, LayerSums& out) override;

 private:
  // Each layer's weights beside its place in the snapshot.
  const std::vector<SnapshotSpan>& snapshot_spans(const std::vector<size_t>& layers);

  std::vector<torch::Tensor> params_;
  std::vector<int64_t> offset_;   // into snapshot_, -1 for a layer this backend does not hold
  std::vector<float> snapshot_;
  FusedReducer fused_;

  // The last enqueue's layers and results, until their collect.
  std::vector<size_t> grad_layers_, weight_layers_, update_layers_;
  std::vector<GradStats> grad_out_;
  std::vector<double> weight_out_, update_out_, next_weight_out_;

  // The gradients taken since the last enqueue_grads, and where their values are.
  std::vector<size_t> taken_grads_;
  std::vector<MutableSpan> taken_grad_spans_;

  // Scratch reused every step.
  std::vector<ConstSpan> const_spans_;
  std::vector<MutableSpan> mutable_spans_;
  std::vector<SnapshotSpan> snapshot_spans_;
};

}  // namespace keel::probe
