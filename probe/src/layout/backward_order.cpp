#include "backward_order.hpp"

#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

namespace keel::probe {

// Runs after the accumulator has added the gradient into .grad, and returns its (empty)
// outputs as they were.
class BackwardOrder::ArrivalHook final : public torch::autograd::FunctionPostHook {
 public:
  ArrivalHook(std::shared_ptr<Arrivals> arrivals, size_t layer) : arrivals_(std::move(arrivals)), layer_(layer) {}

  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list& /*inputs*/) override {
    std::atomic<int64_t>& position = arrivals_->position[layer_];
    int64_t unset = -1;
    // Several backward passes per step (gradient accumulation): keep the first arrival.
    if (position.load(std::memory_order_relaxed) == -1) {
      const int64_t pos = arrivals_->next.fetch_add(1, std::memory_order_relaxed);
      position.compare_exchange_strong(unset, pos, std::memory_order_relaxed);
    }
    return outputs;
  }

 private:
  std::shared_ptr<Arrivals> arrivals_;   // the hook may outlive the BackwardOrder
  size_t layer_;
};

void BackwardOrder::track(const std::vector<torch::Tensor>& params, std::vector<bool> swapped) {
  // The new parameters are hooked before the old ones are let go: a hook that cannot be
  // registered leaves the old parameters tracked, never a table of another size than the
  // probe's layers.
  Tracked next{params, std::move(swapped), std::make_shared<Arrivals>(params.size()),
               std::vector<Accumulator>(params.size()), std::vector<uintptr_t>(params.size(), 0)};
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
    // Only a leaf has an accumulator: a non-leaf (a tensor the model computes and registers)
    // passes its gradient on instead, and its arrivals are not recorded.
    if (t.accumulators[i] || !t.params[i].requires_grad() || !t.params[i].is_leaf()) continue;
    if (!t.swapped.empty() && t.swapped[i]) continue;
    Accumulator accumulator = torch::autograd::impl::grad_accumulator(t.params[i]);
    if (!accumulator) continue;
    t.keys[i] = accumulator->add_post_hook(std::make_unique<ArrivalHook>(t.arrivals, i));
    t.accumulators[i] = std::move(accumulator);
  }
}

void BackwardOrder::remove_hooks(Tracked& t) {
  // A hook stays with its accumulator when the parameter is frozen again; removing it is
  // still ours to do.
  for (size_t i = 0; i < t.params.size(); ++i) {
    if (!t.accumulators[i]) continue;
    t.accumulators[i]->del_post_hook(t.keys[i]);
    t.accumulators[i].reset();
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
  return now_.accumulators[layer] && position(layer) == -1 && now_.arrivals->next.load(std::memory_order_acquire) > 0;
}

}  // namespace keel::probe
