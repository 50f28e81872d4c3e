#include "layer_reducer.hpp"

#include <utility>

namespace keel::probe {

LayerReducer::LayerReducer(std::vector<torch::Tensor> params)
    : params_(std::move(params)), cuda_(params_), cpu_(params_), generic_(params_), sums_(params_.size()) {}

void LayerReducer::measure_updates_of(torch::optim::Optimizer* optimizer) { cuda_.measure_updates_of(optimizer); }

bool LayerReducer::needs_device_snapshot() const {
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

void LayerReducer::enqueue_grads(float unscale) {
  const auto order = backends();
  for (auto& layers : grad_layers_) layers.clear();
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& grad = params_[i].grad();
    if (!grad.defined()) {
      sums_.grads[i] = GradStats{};
      sums_.grads[i].zeros = params_[i].numel();
      continue;
    }
    for (size_t b = 0; b < order.size(); ++b) {
      if (order[b]->takes_grad(i, grad)) {
        grad_layers_[b].push_back(i);
        break;
      }
    }
  }
  for (size_t b = 0; b < order.size(); ++b) order[b]->enqueue_grads(grad_layers_[b], unscale);
}

void LayerReducer::finish_grads(const VerdictRequest* verdict) {
  cuda_.finish_grads(verdict, /*gradients_elsewhere=*/!(grad_layers_[kCpu].empty() && grad_layers_[kGeneric].empty()));
}

void LayerReducer::collect_grads() {
  for (ReductionBackend* backend : backends()) backend->collect_grads(sums_);
}

bool LayerReducer::device_pass_on(int device_index) const { return cuda_.pass_on(device_index); }

torch::Tensor LayerReducer::found_inf() const { return cuda_.found_inf(); }

float LayerReducer::collected_found_inf() const { return cuda_.collected_found_inf(); }

void LayerReducer::partition_weights(bool for_update) {
  const auto order = backends();
  for (auto& layers : weight_layers_) layers.clear();
  for (size_t i = 0; i < params_.size(); ++i) {
    for (size_t b = 0; b < order.size(); ++b) {
      if (order[b]->takes_weights(i, for_update)) {
        weight_layers_[b].push_back(i);
        break;
      }
    }
  }
}

void LayerReducer::enqueue_weights(bool for_update) {
  partition_weights(for_update);
  const auto order = backends();
  for (size_t b = 0; b < order.size(); ++b) order[b]->enqueue_weights(weight_layers_[b], for_update);
}

void LayerReducer::collect_weights() {
  for (ReductionBackend* backend : backends()) backend->collect_weights(sums_);
}

void LayerReducer::enqueue_updates() {
  partition_weights(/*for_update=*/true);
  const auto order = backends();
  for (size_t b = 0; b < order.size(); ++b) order[b]->enqueue_updates(weight_layers_[b]);
}

void LayerReducer::collect_updates(bool applied) {
  for (ReductionBackend* backend : backends()) backend->collect_updates(applied, sums_);
}

}  // namespace keel::probe
