// BackwardOrder: which layer's gradient arrived first in this step's backward pass.
//
// What it is for: "first non-finite in backward order" needs the arrival order of gradients,
// which only autograd knows. A hook on each parameter's gradient accumulator (the AccumulateGrad
// node, after it has accumulated) records its arrival position; it does no arithmetic, so it
// costs an atomic increment per parameter per backward. The hooked accumulators are held, as
// PyTorch's DDP holds them: a parameter keeps only a weak reference to its own, which the
// step's graph would otherwise be the last to hold. Held, they are not rebuilt in every
// forward: at 2,000 tensors the step is 0.6-2.6% faster for it, where a tensor hook per
// parameter (keel's before) cost -0.5% to +2.4% (keel-bench-probe --tensors-only).
// Threads: hooks run on whichever thread autograd uses; rearm() and position() on the training
// thread between backward passes. Never: touches gradient values, allocates in a hook.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/torch.h>

namespace keel::probe {

class BackwardOrder {
 public:
  // Registers one hook per parameter that requires grad, but those `swapped` marks (data a
  // wrapper replaces, TrainedModel::data_swapped; none when empty): their arrivals are not
  // recorded.
  explicit BackwardOrder(const std::vector<torch::Tensor>& params, std::vector<bool> swapped = {}) {
    track(params, std::move(swapped));
  }
  // Removes the hooks it registered, and only those (a parameter unfrozen since has none).
  ~BackwardOrder() { remove_hooks(now_); }
  BackwardOrder(const BackwardOrder&) = delete;
  BackwardOrder& operator=(const BackwardOrder&) = delete;

  // Follows another set of parameters (the model changed after attach): its hooks leave the
  // old ones, and the new ones are hooked; positions are of the new layers from now on. If a
  // hook cannot be registered it throws and still follows the old ones, as before the call.
  void track(const std::vector<torch::Tensor>& params, std::vector<bool> swapped = {});

  // Forgets the last step's arrivals (call after each optimizer step), and hooks the
  // parameters unfrozen since: their arrivals count from the next backward.
  void rearm();
  // Arrival position of the layer's gradient in this step (0 = first), -1 if none arrived.
  int64_t position(size_t layer) const;
  // Whether this step's backward passed the layer by: its hook was in place and did not run
  // while other layers' hooks did. A step whose gradients did not come from autograd (set
  // by hand) has no arrivals at all and passes no layer by.
  bool passed_by(size_t layer) const;

 private:
  struct Arrivals {
    std::atomic<int64_t> next{0};
    std::vector<std::atomic<int64_t>> position;
    explicit Arrivals(size_t n) : position(n) {}
  };
  // A held accumulator: std::shared_ptr<Node> up to torch 2.x, c10::intrusive_ptr<Node> after.
  using Accumulator = decltype(torch::autograd::impl::grad_accumulator(std::declval<const torch::Tensor&>()));
  // The parameters followed and what hooks them, replaced as one by track().
  struct Tracked {
    std::vector<torch::Tensor> params;
    std::vector<bool> swapped;            // not hooked (empty: none)
    std::shared_ptr<Arrivals> arrivals;   // shared with the hooks, which may outlive us
    // Each hooked parameter's accumulator and our hook's key on it; none for a parameter that
    // was frozen when last hooked.
    std::vector<Accumulator> accumulators;
    std::vector<uintptr_t> keys;
  };
  class ArrivalHook;
  static void hook_unhooked(Tracked& t);
  static void remove_hooks(Tracked& t);

  Tracked now_;
};

}  // namespace keel::probe
