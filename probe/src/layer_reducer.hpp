// LayerReducer: the per-layer reductions of one step, on each tensor's own device.
//
// What it is for: the probe's arithmetic over every parameter. CPU float32 contiguous tensors
// go through FusedReducer (one hand-fused pass per question, all layers in one parallel
// region). Every other tensor (CUDA, bf16, fp16, double, strided) goes through ATen ops that
// run on its device and write into one small double stats tensor per device, brought to the
// host with a single copy per pass.
// Threads: the training thread only. Never: throws for non-finite values; allocates in the CPU
// fast path once warmed up.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "keel/probe/fused_reduce.hpp"

namespace keel::probe {

class LayerReducer {
 public:
  explicit LayerReducer(std::vector<torch::Tensor> params);

  size_t layer_count() const { return params_.size(); }

  // Gradient statistics of every layer; when `unscale` is not 1, first multiplies each
  // gradient by it in place (loss-scaler unscale fused into the same pass). A layer without a
  // gradient reports all zeros.
  void reduce_grads(float unscale);
  // Copies every weight into the snapshot and computes sum w^2 (before the update).
  void snapshot_weights();
  // sum w^2 without a snapshot (param_norm due, update_ratio not).
  void reduce_weights();
  // After the update: sum (W - snapshot)^2, then the snapshot becomes W and sum W^2 is kept as
  // the next step's weight norm, all in one pass. The next step calls reuse_snapshot() instead
  // of snapshot_weights() when nothing but the optimizer touched the weights in between.
  void reduce_updates();
  // The snapshot already equals W (refreshed by the last reduce_updates, or the update was
  // skipped): take the weight norms from it without another pass.
  void reuse_snapshot() { param_sumsq_ = next_param_sumsq_; }
  // The update was skipped: W did not move, so the snapshot and its norms stay as they are.
  void keep_snapshot() { next_param_sumsq_ = param_sumsq_; }

  const std::vector<GradStats>& grad_stats() const { return grad_stats_; }
  const std::vector<double>& param_sumsq() const { return param_sumsq_; }
  const std::vector<double>& update_sumsq() const { return update_sumsq_; }

 private:
  bool on_fast_path(size_t layer) const;
  bool grad_on_fast_path(size_t layer) const;
  void reduce_generic_grads(const std::vector<size_t>& layers, float unscale);
  void weights_generic(const std::vector<size_t>& layers, bool snapshot);
  void updates_generic(const std::vector<size_t>& layers);

  std::vector<torch::Tensor> params_;
  std::vector<int64_t> fast_offset_;        // offset into cpu_snapshot_, -1 when not fast path
  std::vector<float> cpu_snapshot_;          // one reusable buffer for all CPU fp32 weights
  std::vector<torch::Tensor> generic_snapshot_;
  FusedReducer fused_;

  std::vector<GradStats> grad_stats_;
  std::vector<double> param_sumsq_;
  std::vector<double> update_sumsq_;
  std::vector<double> next_param_sumsq_;

  // Scratch reused every step.
  std::vector<size_t> fast_layers_;
  std::vector<size_t> generic_layers_;
  std::vector<ConstSpan> const_spans_;
  std::vector<MutableSpan> mutable_spans_;
  std::vector<SnapshotSpan> snapshot_spans_;
  std::vector<GradStats> fast_grad_out_;
  std::vector<double> fast_sum_out_;
  std::vector<double> fast_sum_out2_;
};

}  // namespace keel::probe
