// AccumulationStats: a CPU gradient's statistics taken as autograd accumulates it, while its
// values are still in cache.
//
// What it is for: the probe's gradient pass runs after backward, and in a model of many small
// tensors most of its time is waiting on memory: by then backward has moved on through the
// whole model, and each gradient (and its weight) is read back from far away. A post hook on
// each small float32 layer's gradient accumulator measures the gradient, and its weight when
// the step reads that too (set_weighs), right after autograd wrote it. The gradient pass then
// takes those results for every layer whose gradient and weight are provably what the hook
// measured: the same tensors, unmoved, and no write since (their version counters). Anything
// else (an unscale, clipping, DDP's averaging, a gradient set by hand) reads as a write, and
// that layer is measured by the pass as before. A layer whose hook results were overtaken so
// is not measured in its hook again: that would be work for nothing every step.
// The results are the pass's, bit for bit: the same kernels over the same buffers.
// Threads: hooks run on the thread autograd runs CPU work on (the one that called backward);
// the training thread reads the results between backward passes, as BackwardOrder does.
// Never: throws into autograd (a hook that fails leaves its layer to the pass), allocates in a
// hook once warmed up.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/torch.h>

#include "keel/probe/fused_reduce.hpp"

namespace keel::probe {

class AccumulationStats {
 public:
  // Hooks the accumulators of `params` that are small dense float32 CPU leaves requiring grad,
  // but those `swapped` marks (TrainedModel::data_swapped; none when empty); if a hook cannot
  // be placed, the layers are left to the pass (never an error). Without `hook`, none is placed
  // and every layer is left to the pass.
  AccumulationStats(const std::vector<torch::Tensor>& params, bool hook, const std::vector<bool>& swapped = {});
  // Removes its hooks; a moved-from one has none.
  ~AccumulationStats() { remove_hooks(); }
  AccumulationStats(AccumulationStats&& other) noexcept { take_over(other); }
  AccumulationStats& operator=(AccumulationStats&& other) noexcept {
    if (this != &other) {
      remove_hooks();
      take_over(other);
    }
    return *this;
  }
  AccumulationStats(const AccumulationStats&) = delete;
  AccumulationStats& operator=(const AccumulationStats&) = delete;

  // Whether a hook would be placed on `param`'s accumulator: a small dense float32 CPU leaf that
  // requires grad (swapped aside).
  static bool hookable(const torch::Tensor& param);

  // Whether the hooks measure each weight too: the steps that read W beside the gradients.
  // Read by the next backward's hooks.
  void set_weighs(bool weighs) { shared_->weighs.store(weighs, std::memory_order_relaxed); }

  // The gradient pass: the hook's results for `layer` if `grad` (its gradient now) and the
  // weight are what the hook measured, untouched since; `with_weight` also asks for the
  // weight's sum of squares. False leaves the layer to the pass.
  bool take(size_t layer, const torch::Tensor& grad, bool with_weight, GradStats& stats, double& weight_sumsq);

  // A step has ended: what the hooks measured before now is no longer this step's (a gradient
  // set by hand next step may reuse a freed one's addresses).
  void next_step() { shared_->epoch.fetch_add(1, std::memory_order_relaxed); }

  // The hooks' time on autograd's thread since the last call, in microseconds (every 8th
  // measurement is timed, and counts for 8).
  double take_hook_us();

  // Where a measured tensor's elements were: its storage, the offset into it, and their count.
  struct Placement {
    const void* storage = nullptr;
    int64_t offset = 0;
    int64_t numel = 0;
    bool operator==(const Placement& o) const { return storage == o.storage && offset == o.offset && numel == o.numel; }
  };

 private:
  // What a hook found, written by the hook and read by take(). Two whole cache lines, which
  // the hook of a later layer asks for ahead of its own (Hook::prefetch_for_later_hook).
  struct alignas(64) Measured {
    const c10::TensorImpl* grad = nullptr;   // nullptr: nothing measured
    Placement grad_at;
    uint32_t grad_version = 0;
    uint32_t weight_version = 0;
    Placement weight_at;
    bool weighed = false;
    uint64_t epoch = 0;
    GradStats stats;
    double weight_sumsq = 0;
  };
  // Shared with the hooks, which may outlive this object (a backward still running).
  struct Shared {
    explicit Shared(size_t n) : measured(n), overtaken(n) {}
    std::vector<Measured> measured;
    std::vector<std::atomic<bool>> overtaken;   // its results were written over: the pass measures it
    std::atomic<bool> weighs{false};
    std::atomic<uint64_t> epoch{0};
    std::atomic<int64_t> hook_ns{0};
    std::atomic<uint32_t> measurements{0};
  };
  class Hook;
  void remove_hooks() noexcept;
  void take_over(AccumulationStats& other) noexcept;

  std::vector<torch::Tensor> params_;
  std::shared_ptr<Shared> shared_;
  // A held accumulator: std::shared_ptr<Node> up to torch 2.x, c10::intrusive_ptr<Node> after.
  using Accumulator = decltype(torch::autograd::impl::grad_accumulator(std::declval<const torch::Tensor&>()));
  std::vector<Accumulator> accumulators_;
  std::vector<uintptr_t> keys_;
};

}  // namespace keel::probe
