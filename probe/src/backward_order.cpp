#include "backward_order.hpp"

namespace keel::probe {

BackwardOrder::BackwardOrder(const std::vector<torch::Tensor>& params)
    : arrivals_(std::make_shared<Arrivals>(params.size())), params_(params) {
  rearm();
  handles_.assign(params_.size(), 0);
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].requires_grad()) continue;
    std::shared_ptr<Arrivals> arrivals = arrivals_;
    handles_[i] = params_[i].register_hook([arrivals, i](const torch::Tensor&) {
      int64_t unset = -1;
      // Several backward passes per step (gradient accumulation): keep the first arrival.
      if (arrivals->position[i].load(std::memory_order_relaxed) == -1) {
        const int64_t pos = arrivals->next.fetch_add(1, std::memory_order_relaxed);
        arrivals->position[i].compare_exchange_strong(unset, pos, std::memory_order_relaxed);
      }
    });
  }
}

BackwardOrder::~BackwardOrder() {
  for (size_t i = 0; i < params_.size(); ++i) {
    if (params_[i].requires_grad()) params_[i].remove_hook(handles_[i]);
  }
}

void BackwardOrder::rearm() {
  arrivals_->next.store(0, std::memory_order_relaxed);
  for (auto& p : arrivals_->position) p.store(-1, std::memory_order_relaxed);
}

int64_t BackwardOrder::position(size_t layer) const {
  return arrivals_->position[layer].load(std::memory_order_acquire);
}

}  // namespace keel::probe
