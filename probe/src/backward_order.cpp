#include "backward_order.hpp"

namespace keel::probe {

void BackwardOrder::track(const std::vector<torch::Tensor>& params) {
  remove_hooks();
  // The old hooks may still run (a backward on another thread): they hold the old arrivals.
  arrivals_ = std::make_shared<Arrivals>(params.size());
  params_ = params;
  handles_.assign(params.size(), 0);
  hooked_.assign(params.size(), false);
  rearm();
}

void BackwardOrder::hook_unhooked() {
  for (size_t i = 0; i < params_.size(); ++i) {
    if (hooked_[i] || !params_[i].requires_grad()) continue;
    std::shared_ptr<Arrivals> arrivals = arrivals_;
    handles_[i] = params_[i].register_hook([arrivals, i](const torch::Tensor&) {
      int64_t unset = -1;
      // Several backward passes per step (gradient accumulation): keep the first arrival.
      if (arrivals->position[i].load(std::memory_order_relaxed) == -1) {
        const int64_t pos = arrivals->next.fetch_add(1, std::memory_order_relaxed);
        arrivals->position[i].compare_exchange_strong(unset, pos, std::memory_order_relaxed);
      }
    });
    hooked_[i] = true;
  }
}

void BackwardOrder::remove_hooks() {
  // A hook stays with its tensor when it is frozen again; removing it is still ours to do.
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!hooked_[i]) continue;
    try {
      params_[i].remove_hook(handles_[i]);
    } catch (const std::exception&) {
      // Ending the probe must not throw; the hook left only counts arrivals.
    }
    hooked_[i] = false;
  }
}

void BackwardOrder::rearm() {
  hook_unhooked();
  arrivals_->next.store(0, std::memory_order_relaxed);
  for (auto& p : arrivals_->position) p.store(-1, std::memory_order_relaxed);
}

int64_t BackwardOrder::position(size_t layer) const {
  return arrivals_->position[layer].load(std::memory_order_acquire);
}

bool BackwardOrder::passed_by(size_t layer) const {
  return hooked_[layer] && position(layer) == -1 && arrivals_->next.load(std::memory_order_acquire) > 0;
}

}  // namespace keel::probe
