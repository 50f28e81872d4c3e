// CpuFusedReductions: the reductions of CPU float32 contiguous layers, with FusedReducer's
// hand-fused passes (one parallel region over every layer per pass).
//
// What it is for: the CPU backend of ReductionBackend. Its update_ratio compares W with a
// copy taken before the step: one host buffer for all of its layers, refreshed by the update
// pass itself, so a step with update_ratio due reads W twice and copies it once. A plain SGD
// step needs no copy: it moves W by -lr * g, whose norm the gradient pass has measured
// (plan_update). Its W is then read once a step, for its norm: in the gradient pass when this
// backend holds the whole model, else after the optimizer's step. A small layer's gradient (and
// that W) is measured as autograd accumulates it, while still in cache (AccumulationStats), and
// the gradient pass takes those results wherever nothing has written either since.
// Threads: the training thread only. Never: allocates once warmed up.
#pragma once

#include <cstdint>
#include <vector>

#include "accumulation_stats.hpp"
#include "reduction_backend.hpp"
#include "update_rules.hpp"

namespace keel::probe {

class CpuFusedReductions final : public ReductionBackend {
 public:
  // `measure_in_backward`: small gradients are measured in their accumulators' hooks
  // (AccumulationStats); otherwise all in the pass.
  CpuFusedReductions(const std::vector<torch::Tensor>& params, bool measure_in_backward,
                     const std::vector<bool>& swapped = {});

  // The optimizer whose steps the update pass measures (nullptr: not known). Asked again
  // whenever its parameter groups change.
  void measure_updates_of(const OptimizerAdapter* optimizer);
  // Every step, before its gradient pass: how its update will be measured. From the gradients
  // when this step's gradient pass measures its update (`grads_this_step`) and every group of
  // the optimizer is plain SGD now; otherwise against the copy of W. Holding the whole model,
  // the gradient pass then reads each layer's W beside its gradient (W is read before every
  // such update: measured_next_norms), and enqueue_weights only the layers it did not reach.
  void plan_update(bool grads_this_step);
  // Whether the update as planned can be measured without a fresh copy of W: it is taken from
  // the gradients, or the copy still holds W as the last update pass left it.
  bool update_needs_no_copy() const { return update_from_grads_ || snapshot_is_w_; }
  // Whether the last update pass measured |W_new|^2 of its layers. Not when it holds every
  // layer of the model and took the update from the gradients: then no pass runs after the
  // step at all, and the next step reads W before its update (the caller trusts no norms).
  bool measured_next_norms() const { return measured_next_norms_; }
  // This step's gradient pass read `layer`'s W (its norm is in collect_grads' output).
  bool weighed_this_step(size_t layer) const { return weighed_this_pass_ && weighed_in_pass_[layer] == grad_pass_; }
  // The time the accumulators' hooks took measuring gradients since the last call (us).
  double take_hook_us() { return accumulated_.take_hook_us(); }
  // The step has ended (AccumulationStats::next_step).
  void end_step() { accumulated_.next_step(); }
  // The host memory its copy of W holds (0 until an update is first measured against one).
  size_t copy_bytes() const { return snapshot_.size() * sizeof(float); }

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
  // Each layer's weights beside its place in the snapshot.
  const std::vector<SnapshotSpan>& snapshot_spans(const std::vector<size_t>& layers);
  // Each layer's weights, read only.
  const std::vector<ConstSpan>& weight_spans(const std::vector<size_t>& layers);
  // Whether this step's gradient pass reads W too: a whole model whose update is planned
  // from the gradients (plan_update) reads W before every update anyway.
  bool weighs_with_grads() const { return update_from_grads_ && holds_every_layer_; }

  std::vector<torch::Tensor> params_;
  std::vector<int64_t> offset_;   // into snapshot_, -1 for a layer this backend does not hold
  // Sized at its first use: a run whose updates all come from the gradients never holds a
  // second copy of its weights.
  std::vector<float> snapshot_;
  size_t snapshot_elems_ = 0;
  bool snapshot_is_w_ = false;   // refreshed by the last update pass, or copied this step

  // Plain SGD (plan_update): each layer's group, each group's lr as the step applies it, and
  // whether this step's update (and the last update pass) was taken from the gradients.
  const OptimizerAdapter* optimizer_ = nullptr;
  std::vector<int> group_of_;
  std::vector<double> group_lrs_;
  bool update_from_grads_ = false;
  bool updates_were_from_grads_ = false;
  bool holds_every_layer_ = false;
  bool measured_next_norms_ = true;

  // The weights read by the gradient pass (plan_update): their spans as the gradients are
  // taken, whether every taken layer's W could be (dense, as long as its gradient), the norms,
  // and which layers this step's pass weighed (weighed_in_pass_[layer] == grad_pass_).
  bool taken_weights_ok_ = true;
  bool weighed_this_pass_ = false;
  std::vector<ConstSpan> taken_weight_spans_;
  std::vector<double> grad_weight_out_;
  std::vector<uint64_t> weighed_in_pass_;
  uint64_t grad_pass_ = 0;
  FusedReducer fused_;

  // The last enqueue's layers and results, until their collect.
  std::vector<size_t> grad_layers_, weight_layers_, update_layers_;
  std::vector<GradStats> grad_out_;
  std::vector<double> weight_out_, update_out_, next_weight_out_;
  std::vector<double> update_lrs_;   // the last update pass's layers' lr, from the gradients

  // The gradients taken since the last enqueue_grads, and where their values are.
  std::vector<size_t> taken_grads_;
  std::vector<MutableSpan> taken_grad_spans_;

  // Gradients measured as autograd accumulated them: usable this step when nothing is
  // unscaled in the pass. The layers taken with those results (and their W's norms, when the
  // pass weighs), and the last enqueue's, until their collect.
  AccumulationStats accumulated_;
  bool accumulated_usable_ = false;
  std::vector<size_t> taken_accumulated_, accumulated_layers_;
  std::vector<GradStats> taken_accumulated_stats_, accumulated_stats_;
  std::vector<double> taken_accumulated_weights_, accumulated_weights_;

  // Scratch reused every step.
  std::vector<ConstSpan> const_spans_;
  std::vector<MutableSpan> mutable_spans_;
  std::vector<SnapshotSpan> snapshot_spans_;
};

}  // namespace keel::probe
