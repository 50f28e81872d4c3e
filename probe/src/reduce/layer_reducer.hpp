// LayerReducer: the per-layer reductions of one step, on each tensor's own device.
//
// What it is for: the probe's arithmetic over every parameter. It hands each layer to one of
// three backends (reduction_backend.hpp), asked in this order: CudaFusedReductions (dense CUDA
// tensors, one fused launch per device, updates rebuilt from AdamW/Adam/SGD's state with no
// copy of the weights), CpuFusedReductions (CPU float32 contiguous), and GenericReductions
// (everything else, ATen ops on the tensor's device). The device passes start first, so the
// GPU works while the host reduces its own layers. A layer without a gradient reports all
// zeros.
// Threads: the training thread only. Never: throws for non-finite values; allocates in the CPU
// fast path once warmed up.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include <torch/torch.h>

#include "cpu_fused_reductions.hpp"
#include "cuda_fused_reductions.hpp"
#include "generic_reductions.hpp"
#include "gradient_slot.hpp"
#include "planned_tensor_check.hpp"

namespace keel::probe {

class LayerReducer {
 public:
  // `measure_in_backward`: ProbeOptions::measure_in_backward (the CPU backend's hooks; unset,
  // decided for these parameters by measures_in_backward). `swapped`: the parameters whose data
  // a wrapper replaces (TrainedModel::data_swapped), whose gradients are never measured in
  // backward (none when empty).
  LayerReducer(std::vector<torch::Tensor> params, std::optional<bool> measure_in_backward,
               const std::vector<bool>& swapped = {});
  // The optimizer whose step the update pass measures. With AdamW, Adam or SGD, the updates of
  // the layers on a CUDA device are rebuilt from its state after the step, and those layers
  // keep no snapshot; otherwise (or with nullptr) every layer off the CPU keeps one. A plain
  // SGD's updates of CPU layers are taken from the gradient pass (plan_update). Asked again
  // when its parameter groups change.
  void measure_updates_of(const OptimizerAdapter* optimizer);
  // Every step, before its gradient pass: decides how the CPU layers' update is measured
  // (CpuFusedReductions::plan_update). `grads_this_step`: the step's update is measured and
  // its gradient pass runs.
  void plan_update(bool grads_this_step) { cpu_.plan_update(grads_this_step); }
  // After plan_update: whether the update can be measured with no fresh copy of W, given that
  // nothing but the optimizer wrote W since the last update pass (reuse_snapshot's condition).
  bool update_needs_no_copy() const { return cpu_.update_needs_no_copy(); }

  // Whether measuring the update would copy a weight that lives off the CPU: a layer there
  // whose update cannot be rebuilt (another optimizer, or a layout the device passes refuse).
  bool needs_device_snapshot() const;
  // Whether every layer was planned on the CPU.
  bool all_on_cpu() const { return all_on_cpu_; }
  // Whether every layer's update is rebuilt on its CUDA device from the optimizer's state: no
  // snapshot before the step and no host pass after it, as the deferred step needs.
  bool device_rebuilds_every_update() const;

  // Gradient statistics of every layer; when `unscale` is not 1, first multiplies each
  // gradient by it in place (loss-scaler unscale fused into the same pass). A layer without a
  // gradient reports all zeros. In three parts: enqueue_grads starts the device passes and
  // runs the host ones; finish_grads enqueues, after whatever the caller put on the stream in
  // between (the loss's copy), the step's verdict when asked for and the results' copy;
  // collect_grads takes the device results, waiting only where they have not arrived.
  // With `check`, each planned tensor is checked on the walk to its gradient; false: one left
  // its plan, and the walk stopped before any pass started or wrote a gradient (the layers
  // must be planned again before the next).
  bool enqueue_grads(float unscale, PlannedTensorCheck* check = nullptr);
  void finish_grads(const VerdictRequest* verdict = nullptr);
  void collect_grads();
  // Whether the last enqueue_grads put a fused pass on this CUDA device's current stream (so
  // collect_grads covers what the caller enqueues there before finish_grads).
  bool device_pass_on(int device_index) const;
  // After finish_grads with a verdict (which needs every gradient in one device's fused pass):
  // found_inf on that device (float32, one element), and, after collect_grads, its value
  // (1: unsafe). Throws std::logic_error when the last finish_grads asked for none.
  torch::Tensor found_inf() const;
  float collected_found_inf() const;
  // sum w^2 of every weight, before the update; `for_update`: also copies each weight into
  // the snapshot, but for the layers whose update is rebuilt from the optimizer. In two parts,
  // as the gradients: enqueued before finish_grads, the device's part is in when the
  // gradients' results are, and collect_weights does not wait again.
  void enqueue_weights(bool for_update);
  void collect_weights();
  // After the update: sum (W - snapshot)^2, then the snapshot becomes W and sum W^2 is kept as
  // the next step's weight norm, all in one pass. The next step calls reuse_snapshot() instead
  // of enqueue_weights(true) when nothing but the optimizer touched the weights in between.
  // Layers on a device are rebuilt from the optimizer's state instead, enqueued by
  // enqueue_updates and taken by collect_updates; `applied` false says the device skipped the
  // update (found_inf), so they moved by nothing.
  void reduce_updates() {
    enqueue_updates();
    collect_updates(true);
  }
  // Whether the last update pass (or keep_snapshot) left every layer's |W_new|^2 for
  // reuse_snapshot(). A model held whole by the CPU backend under a plain SGD leaves none: its
  // next step reads W before the update instead (CpuFusedReductions::enqueue_updates).
  bool next_norms_measured() const { return next_norms_measured_; }
  void enqueue_updates();
  void collect_updates(bool applied);
  // The snapshot already equals W (refreshed by the last reduce_updates, or the update was
  // skipped): take the weight norms from it without another pass.
  void reuse_snapshot() { sums_.param_sumsq = sums_.next_param_sumsq; }
  // The update was skipped: W did not move, so the snapshot and its norms stay as they are.
  void keep_snapshot() {
    sums_.next_param_sumsq = sums_.param_sumsq;
    next_norms_measured_ = true;
  }

  // A layer as the last enqueue_grads found it on its way to the gradient: frozen (it does not
  // require grad), without a gradient, or with one. grad_passes() counts the enqueue_grads
  // calls, so that a caller can tell the states are this step's.
  enum class LayerState : uint8_t { kFrozen, kWithoutGrad, kWithGrad };
  static LayerState state_of(bool requires_grad, bool has_grad) {
    return !requires_grad ? LayerState::kFrozen : has_grad ? LayerState::kWithGrad : LayerState::kWithoutGrad;
  }
  static LayerState state_of(const torch::Tensor& param) {
    const GradientSlot slot = gradient_slot(param);
    return state_of(slot.requires_grad, slot.has_grad());
  }
  LayerState layer_state(size_t layer) const { return states_[layer]; }
  uint64_t grad_passes() const { return grad_passes_; }

  // The time autograd's accumulators spent measuring gradients for the CPU backend since the
  // last call (us): the probe's, though it is spent inside backward.
  double take_hook_us() { return cpu_.take_hook_us(); }
  // The step has ended: measurements taken in its backward are not the next step's.
  void end_step() { cpu_.end_step(); }

  const std::vector<GradStats>& grad_stats() const { return sums_.grads; }
  // A layer's element count: fixed for the reducer's life (a reshape is a new layout).
  int64_t numel(size_t layer) const { return numels_[layer]; }
  const std::vector<double>& param_sumsq() const { return sums_.param_sumsq; }
  const std::vector<double>& update_sumsq() const { return sums_.update_sumsq; }

 private:
  // In the order they are asked which layers they take: the generic backend takes the rest.
  // Indices into backends(), grads_taken_ and weight_layers_.
  enum Backend : size_t { kCuda, kCpu, kGeneric, kBackends };
  std::array<ReductionBackend*, kBackends> backends() { return {&cuda_, &cpu_, &generic_}; }
  void prefetch_grad_chain(size_t layer) const;
  void prefetch_weight_chain(size_t layer) const;
  // Hands each layer's weights to the first backend that takes them (weight_layers_). The
  // layers this step's gradient pass weighed (dense fp32 CPU weights, their norms in) are not
  // asked: the weights' pass leaves them out, the update pass hands them to the CPU backend.
  void partition_weights(bool for_update, bool weighed_to_cpu);

  std::vector<torch::Tensor> params_;
  CudaFusedReductions cuda_;
  CpuFusedReductions cpu_;
  GenericReductions generic_;
  LayerSums sums_;
  std::vector<int64_t> numels_;
  bool all_on_cpu_;

  // Per backend, in backends() order: how many gradients it took this step, and (scratch
  // reused every step) the layers of a weight pass.
  std::array<size_t, kBackends> grads_taken_{};
  std::vector<LayerState> states_;
  uint64_t grad_passes_ = 0;
  bool next_norms_measured_ = true;
  std::array<std::vector<size_t>, kBackends> weight_layers_;
};

}  // namespace keel::probe
