#include "backward_order.hpp"

namespace keel::probe {

void BackwardOrder::track(const std::vector<torch::Tensor>& params) {
  // The new parameters are hooked before the old ones are let go: a hook that cannot be
  // registered leaves the old parameters tracked, never a table of another size than the
  // probe's layers.
  Tracked next{params, std::make_shared<Arrivals>(params.size()), std::vector<unsigned>(params.size(), 0),
               std::vector<bool>(params.size(), false)};
  try {
    hook_unhooked(next);
  } catch (...) {
    remove_hooks(next);
    throw;
  }
  remove_hooks(now_);
  // The old hooks may still run (a backward on another thread): they hold the old arrivals.
  now_ = std::move(next);
  rearm();
}

void BackwardOrder::hook_unhooked(Tracked& t) {
  for (size_t i = 0; i < t.params.size(); ++i) {
    if (t.hooked[i] || !t.params[i].requires_grad()) continue;
    std::shared_ptr<Arrivals> arrivals = t.arrivals;
    t.handles[i] = t.params[i].register_hook([arrivals, i](const torch::Tensor&) {
      int64_t unset = -1;
      // Several backward passes per step (gradient accumulation): keep the first arrival.
      if (arrivals->position[i].load(std::memory_order_relaxed) == -1) {
        const int64_t pos = arrivals->next.fetch_add(1, std::memory_order_relaxed);
        arrivals->position[i].compare_exchange_strong(unset, pos, std::memory_order_relaxed);
      }
    });
    t.hooked[i] = true;
  }
}

void BackwardOrder::remove_hooks(Tracked& t) {
  // A hook stays with its tensor when it is frozen again; removing it is still ours to do.
  for (size_t i = 0; i < t.params.size(); ++i) {
    if (!t.hooked[i]) continue;
    try {
      t.params[i].remove_hook(t.handles[i]);
    } catch (const std::exception&) {
      // Ending the probe must not throw; the hook left only counts arrivals.
    }
    t.hooked[i] = false;
  }
}

void BackwardOrder::rearm() {
  hook_unhooked(now_);
  now_.arrivals->next.store(0, std::memory_order_relaxed);
  for (auto& p : now_.arrivals->position) p.store(-1, std::memory_order_relaxed);
}

int64_t BackwardOrder::position(size_t layer) const {
  return now_.arrivals->position[layer].load(std::memory_order_acquire);
}

bool BackwardOrder::passed_by(size_t layer) const {
  return now_.hooked[layer] && position(layer) == -1 && now_.arrivals->next.load(std::memory_order_acquire) > 0;
}

}  // namespace keel::probe
