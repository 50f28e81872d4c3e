// LayerReducer: the per-layer reductions of one step, on each tensor's own device.
//
// What it is for: the probe's arithmetic over every parameter. CPU float32 contiguous tensors
// go through FusedReducer (one hand-fused pass per question, all layers in one parallel
// region). CUDA tensors (dense, contiguous, fp32/fp64/bf16/fp16) go through the fused
// device passes (device_passes.hpp), one launch per device, where keel is built with the CUDA
// probe: gradients, weight norms, and, when the optimizer's update can be rebuilt from its
// state (AdamW, Adam, SGD: update_rules.hpp), the update, with no copy of the weights. Every
// other tensor (strided, other types, sparse gradients by the values they store, or on a GPU
// under another optimizer) goes through ATen ops that run on its device and write into one
// small double stats tensor per device, brought to the host with a single copy per pass; a
// snapshot of its weights gives its update.
// Threads: the training thread only. Never: throws for non-finite values; allocates in the CPU
// fast path once warmed up.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include <torch/torch.h>

#include "device_passes.hpp"
#include "keel/probe/fused_reduce.hpp"

namespace keel::probe {

class LayerReducer {
 public:
  explicit LayerReducer(std::vector<torch::Tensor> params);
  // The optimizer whose step the update pass measures. With AdamW, Adam or SGD, the updates of
  // the layers on a CUDA device are rebuilt from its state after the step, and those layers
  // keep no snapshot; otherwise (or with nullptr) every layer off the CPU keeps one.
  void measure_updates_of(torch::optim::Optimizer* optimizer);

  size_t layer_count() const { return params_.size(); }
  // Whether measuring the update would copy a weight that lives off the CPU: a layer there
  // whose update cannot be rebuilt (another optimizer, or a layout the device passes refuse).
  bool needs_device_snapshot() const;

  // Gradient statistics of every layer; when `unscale` is not 1, first multiplies each
  // gradient by it in place (loss-scaler unscale fused into the same pass). A layer without a
  // gradient reports all zeros. In three parts: enqueue_grads starts the device passes and
  // runs the host ones; finish_grads enqueues, after whatever the caller put on the stream in
  // between (the loss's copy), the step's verdict when asked for and the results' copy;
  // collect_grads takes the device results, waiting only where they have not arrived.
  void enqueue_grads(float unscale);
  void finish_grads(const VerdictRequest* verdict = nullptr);
  void collect_grads();
  void reduce_grads(float unscale) {
    enqueue_grads(unscale);
    finish_grads();
    collect_grads();
  }
  // Whether the last enqueue_grads put a fused pass on this CUDA device's current stream (so
  // collect_grads covers what the caller enqueues there before finish_grads).
  bool device_pass_on(int device_index) const;
  // After finish_grads with a verdict (which needs every gradient in one device's fused pass):
  // found_inf on that device (float32, one element), and, after collect_grads, its value
  // (1: unsafe). Throws std::logic_error when the last finish_grads asked for none.
  torch::Tensor found_inf() const;
  float collected_found_inf() const;
  // Copies every weight into the snapshot and computes sum w^2 (before the update). Layers
  // whose update is rebuilt from the optimizer get sum w^2 only.
  void snapshot_weights();
  // sum w^2 without a snapshot (param_norm due, update_ratio not).
  void reduce_weights();
  // After the update: sum (W - snapshot)^2, then the snapshot becomes W and sum W^2 is kept as
  // the next step's weight norm, all in one pass. The next step calls reuse_snapshot() instead
  // of snapshot_weights() when nothing but the optimizer touched the weights in between.
  // Layers on a device are rebuilt from the optimizer's state instead, enqueued by
  // enqueue_updates and taken by collect_updates; `applied` false says the device skipped the
  // update (found_inf), so they moved by nothing.
  void reduce_updates() {
    enqueue_updates();
    collect_updates(true);
  }
  void enqueue_updates();
  void collect_updates(bool applied);
  // The snapshot already equals W (refreshed by the last reduce_updates, or the update was
  // skipped): take the weight norms from it without another pass.
  void reuse_snapshot() { param_sumsq_ = next_param_sumsq_; }
  // The update was skipped: W did not move, so the snapshot and its norms stay as they are.
  void keep_snapshot() { next_param_sumsq_ = param_sumsq_; }

  const std::vector<GradStats>& grad_stats() const { return grad_stats_; }
  const std::vector<double>& param_sumsq() const { return param_sumsq_; }
  const std::vector<double>& update_sumsq() const { return update_sumsq_; }

 private:
  // The CUDA device whose fused pass holds every gradient of the last enqueue_grads (nothing
  // on the host or the generic path, nothing on another device); -1 when there is none.
  int sole_device() const;
  bool on_fast_path(size_t layer) const;
  bool grad_on_fast_path(size_t layer) const;
  // Sorts the layers for a weight pass: fast_layers_ (CPU fp32), the device layers of
  // devices_[*].layers (with `device_only_rebuilt`, only those whose update is rebuilt), and
  // generic_layers_ (the rest).
  void partition_weights(bool device_only_rebuilt);
  void reduce_generic_grads(const std::vector<size_t>& layers, float unscale);
  void weights_generic(const std::vector<size_t>& layers, bool snapshot);
  void weights_on_devices();
  void updates_generic(const std::vector<size_t>& layers);
  void enqueue_updates_on_devices();

  std::vector<torch::Tensor> params_;
  std::vector<int64_t> fast_offset_;        // offset into cpu_snapshot_, -1 when not fast path
  std::vector<float> cpu_snapshot_;          // one reusable buffer for all CPU fp32 weights
  std::vector<torch::Tensor> generic_snapshot_;
  FusedReducer fused_;
  // Per CUDA device index: its fused passes (created on first use; absent where keel has no
  // CUDA probe), and the layers and tensors of the pass in progress on it.
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
  // A device's gradients and its weights are batches of their own: a deferred step's
  // gradient results are collected after its update pass was enqueued.
  struct DeviceLayers {
    std::unique_ptr<DeviceGradPass> grads_pass;
    std::unique_ptr<DeviceGradPass> weights_pass;   // sum w^2: the gradient kernel, read-only
    std::unique_ptr<DeviceUpdatePass> updates_pass;
    Batch grads, weights;
  };
  std::map<int, DeviceLayers> devices_;
  torch::optim::Optimizer* rebuild_from_ = nullptr;   // set when its updates can be rebuilt
  std::vector<LayerUpdateRule> rules_;
  std::vector<const LayerUpdateRule*> device_rules_;
  std::vector<UpdateStats> device_update_out_;

  int verdict_device_ = -1;   // the device of the last finish_grads' verdict, -1: none
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
  std::vector<GradStats> device_grad_out_;
  std::vector<double> fast_sum_out_;
  std::vector<double> fast_sum_out2_;
};

}  // namespace keel::probe
