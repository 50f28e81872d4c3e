#include "layer_reducer.hpp"

#include <algorithm>
#include <utility>

#include "backward_measuring.hpp"
#include "version_counter_prefetch.hpp"

namespace keel::probe {
namespace {

std::vector<int64_t> numels_of(const std::vector<torch::Tensor>& params) {
  std::vector<int64_t> numels;
  numels.reserve(params.size());
  for (const torch::Tensor& p : params) numels.push_back(p.numel());
  return numels;
}

// Every cache line of a TensorImpl (about 200 bytes: four lines). The walk reads the first
// line's pointers and, further in, the offset, count, type, device and flags.
void prefetch_tensor_impl(const c10::TensorImpl* impl) {
  const char* bytes = reinterpret_cast<const char*>(impl);
  for (size_t line = 0; line < sizeof(c10::TensorImpl); line += 64) __builtin_prefetch(bytes + line);
}

}  // namespace

LayerReducer::LayerReducer(std::vector<torch::Tensor> params, std::optional<bool> measure_in_backward,
                           const std::vector<bool>& swapped)
    : params_(std::move(params)), cuda_(params_),
      cpu_(params_, measures_in_backward(measure_in_backward, params_, swapped, last_level_cache_bytes()), swapped),
      generic_(params_),
      sums_(params_.size()),
      numels_(numels_of(params_)),
      all_on_cpu_(std::all_of(params_.begin(), params_.end(), [](const torch::Tensor& p) { return p.is_cpu(); })),
      states_(params_.size(), LayerState::kWithoutGrad) {}

// The forward and backward passes have left the tensors' bookkeeping out of cache, and a
// model of 50,000 tensors holds more of it than the cache. Reading a gradient walks a chain of
// objects, each found through the one before: the parameter's TensorImpl, its autograd meta,
// the gradient's TensorImpl, then the gradient's storage (the pass reads the elements through
// it) and the gradient's and the weight's version counters (the hooks' results are checked
// against them, AccumulationStats::take). Each is asked for a few tensors ahead, one link
// closer each time, so that each read finds the link before it in cache rather than waiting on
// memory for all of them in turn. The two TensorImpls are asked for whole: asking for their
// first lines alone left the walk at 215-225 ns a tensor at 50,000 tensors, against 194-205
// (temporary timers around enqueue_grads, four interleaved pairs of runs).
void LayerReducer::prefetch_grad_chain(size_t layer) const {
  const size_t n = params_.size();
  if (layer + 32 < n) prefetch_tensor_impl(params_[layer + 32].unsafeGetTensorImpl());
  if (layer + 24 < n) __builtin_prefetch(params_[layer + 24].unsafeGetTensorImpl()->autograd_meta());
  if (layer + 16 < n) {
    const GradientSlot slot = gradient_slot(params_[layer + 16]);
    if (slot.has_grad()) prefetch_tensor_impl(slot.grad->unsafeGetTensorImpl());
  }
  if (layer + 8 < n) {
    const torch::Tensor& weight = params_[layer + 8];
    const GradientSlot slot = gradient_slot(weight);
    if (!slot.has_grad()) return;
    const c10::TensorImpl& grad = *slot.grad->unsafeGetTensorImpl();
    if (grad.has_storage()) __builtin_prefetch(grad.unsafe_storage().unsafeGetStorageImpl());
    prefetch_version(grad);
    // A CPU weight's too: the CPU backend checks it when the hooks weighed it.
    if (weight.is_cpu()) prefetch_version(*weight.unsafeGetTensorImpl());
  }
}

// As prefetch_grad_chain, for a weight: its TensorImpl, then its storage.
void LayerReducer::prefetch_weight_chain(size_t layer) const {
  const size_t n = params_.size();
  if (layer + 32 < n) __builtin_prefetch(params_[layer + 32].unsafeGetTensorImpl());
  if (layer + 16 < n && params_[layer + 16].has_storage()) {
    __builtin_prefetch(params_[layer + 16].storage().unsafeGetStorageImpl());
  }
}

void LayerReducer::measure_updates_of(const OptimizerAdapter* optimizer) {
  cuda_.measure_updates_of(optimizer);
  cpu_.measure_updates_of(optimizer);
}

bool LayerReducer::needs_device_snapshot() const {
  // A reducer lives for one layout, and a layout's tensors stay on their devices (a move is
  // a new layout): a model all on the CPU is known at once, without a pass over its tensors.
  if (all_on_cpu_) return false;
  // Off the CPU, only the CUDA backend measures an update without a copy of W.
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].is_cpu() && !cuda_.takes_weights(i, /*for_update=*/true)) return true;
  }
  return false;
}

bool LayerReducer::device_rebuilds_every_update() const {
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!cuda_.takes_weights(i, /*for_update=*/true)) return false;
  }
  return true;
}

bool LayerReducer::enqueue_grads(float unscale, PlannedTensorCheck* check) {
  const auto order = backends();
  grads_taken_.fill(0);
  ++grad_passes_;
  for (ReductionBackend* backend : order) backend->begin_grads(unscale);
  for (size_t i = 0; i < params_.size(); ++i) {
    prefetch_grad_chain(i);
    // What the backends took so far is dropped by their next begin_grads.
    if (check != nullptr && !check->still_planned(i, params_[i])) return false;
    const GradientSlot slot = gradient_slot(params_[i]);
    states_[i] = state_of(slot.requires_grad, slot.has_grad());
    if (!slot.has_grad()) {
      sums_.grads[i] = GradStats{};
      sums_.grads[i].zeros = params_[i].numel();
      continue;
    }
    const torch::Tensor& grad = *slot.grad;
    // A CPU gradient is never the device's: ask the host backends only.
    for (size_t b = grad.is_cpu() ? kCpu : kCuda; b < order.size(); ++b) {
      if (order[b]->take_grad(i, grad)) {
        ++grads_taken_[b];
        break;
      }
    }
  }
  for (ReductionBackend* backend : order) backend->enqueue_grads(unscale);
  return true;
}

void LayerReducer::finish_grads(const VerdictRequest* verdict) {
  cuda_.finish_grads(verdict, /*gradients_elsewhere=*/grads_taken_[kCpu] + grads_taken_[kGeneric] > 0);
}

void LayerReducer::collect_grads() {
  for (ReductionBackend* backend : backends()) backend->collect_grads(sums_);
}

bool LayerReducer::device_pass_on(int device_index) const { return cuda_.pass_on(device_index); }

torch::Tensor LayerReducer::found_inf() const { return cuda_.found_inf(); }

float LayerReducer::collected_found_inf() const { return cuda_.collected_found_inf(); }

void LayerReducer::partition_weights(bool for_update, bool weighed_to_cpu) {
  const auto order = backends();
  for (auto& layers : weight_layers_) layers.clear();
  for (size_t i = 0; i < params_.size(); ++i) {
    if (cpu_.weighed_this_step(i)) {
      if (weighed_to_cpu) weight_layers_[kCpu].push_back(i);
      continue;
    }
    prefetch_weight_chain(i);
    for (size_t b = params_[i].is_cpu() ? kCpu : kCuda; b < order.size(); ++b) {
      if (order[b]->takes_weights(i, for_update)) {
        weight_layers_[b].push_back(i);
        break;
      }
    }
  }
}

void LayerReducer::enqueue_weights(bool for_update) {
  partition_weights(for_update, /*weighed_to_cpu=*/false);
  const auto order = backends();
  for (size_t b = 0; b < order.size(); ++b) order[b]->enqueue_weights(weight_layers_[b], for_update);
}

void LayerReducer::collect_weights() {
  for (ReductionBackend* backend : backends()) backend->collect_weights(sums_);
}

void LayerReducer::enqueue_updates() {
  partition_weights(/*for_update=*/true, /*weighed_to_cpu=*/true);
  const auto order = backends();
  for (size_t b = 0; b < order.size(); ++b) order[b]->enqueue_updates(weight_layers_[b]);
}

void LayerReducer::collect_updates(bool applied) {
  for (ReductionBackend* backend : backends()) backend->collect_updates(applied, sums_);
  next_norms_measured_ = cpu_.measured_next_norms();
}

}  // namespace keel::probe
