// ReductionBackend: the probe's per-layer reductions for one kind of device, behind one
// interface, so LayerReducer only decides which backend measures which layer.
//
// What it is for: three backends share the work of a step (DESIGN §8).
//   CudaFusedReductions    dense CUDA tensors of fp32/fp64/bf16/fp16: one fused launch per
//                          device per pass (device_passes.hpp), updates rebuilt from the
//                          optimizer's state.
//   CpuFusedReductions     CPU float32 contiguous tensors: FusedReducer's hand-fused passes.
//   GenericReductions      anything else (strided, other types, sparse gradients, other
//                          devices): ATen ops on the tensor's own device.
// LayerReducer asks the backends in that order which layers they take (the device first, so
// its passes start before the host's); the generic one takes whatever is left. Each pass has
// two halves: enqueue starts it (a host backend does all of its work there), collect writes
// its results into the step's LayerSums. A device backend's work runs between the two while
// the host does its own, and a deferred step collects a step later; a backend keeps the
// layers of its last enqueue until their collect.
// Threads: the training thread only.
#pragma once

#include <cstddef>
#include <vector>

#include <torch/torch.h>

#include "keel/probe/fused_reduce.hpp"

namespace keel::probe {

// What a step's reductions found, one entry per layer. Each backend writes the entries of the
// layers it took and leaves the others alone.
struct LayerSums {
  explicit LayerSums(size_t layers)
      : grads(layers), param_sumsq(layers, 0.0), update_sumsq(layers, 0.0), next_param_sumsq(layers, 0.0) {}
  std::vector<GradStats> grads;
  std::vector<double> param_sumsq;        // |W|^2 before this step's update
  std::vector<double> update_sumsq;       // |W_new - W_old|^2
  std::vector<double> next_param_sumsq;   // |W_new|^2: the next step's |W|^2 if nothing else writes W
};

class ReductionBackend {
 public:
  virtual ~ReductionBackend() = default;

  // Starts gathering a step's gradients: what an interrupted gathering took is dropped.
  // `unscale`: what the coming enqueue_grads multiplies the gradients by.
  virtual void begin_grads(float unscale) = 0;
  // Whether it measures this layer's gradient `grad` (defined) this step; if it does, the
  // layer joins its next enqueue_grads. Every backend is asked in the same pass over the
  // layers, and a backend keeps what it needs of the gradient then: at 50,000 tensors a second
  // walk to each gradient's bookkeeping, long out of cache, cost more than the arithmetic.
  virtual bool take_grad(size_t layer, const torch::Tensor& grad) = 0;
  // Starts the gradient statistics of the layers taken since begin_grads; with
  // `unscale` != 1 each gradient is first multiplied by it in place (the loss scaler's
  // unscale, fused into the same read).
  virtual void enqueue_grads(float unscale) = 0;
  // The last enqueue_grads' statistics into out.grads.
  virtual void collect_grads(LayerSums& out) = 0;

  // Whether it measures this layer's weights; `for_update`: and, after the optimizer's step,
  // the update (from a copy of W taken now, or rebuilt from the optimizer's state).
  virtual bool takes_weights(size_t layer, bool for_update) const = 0;
  // Starts |W|^2 of `layers`, before the update; with `for_update`, also takes what the
  // update pass will compare against. A host backend does all of its work here.
  virtual void enqueue_weights(const std::vector<size_t>& layers, bool for_update) = 0;
  // The last enqueue_weights' norms into out.param_sumsq.
  virtual void collect_weights(LayerSums& out) = 0;
  // After the optimizer's step: starts the update pass over `layers` (taken for_update).
  virtual void enqueue_updates(const std::vector<size_t>& layers) = 0;
  // The last enqueue_updates' results into out.update_sumsq and out.next_param_sumsq (and,
  // where the backend rebuilt W_old, its norm into out.param_sumsq). `applied` false: the device's verdict skipped the update, which a backend that compares
  // against a copy measures as it is (zero) and one that rebuilds it must not report.
  virtual void collect_updates(bool applied, LayerSums& out) = 0;
};

}  // namespace keel::probe
