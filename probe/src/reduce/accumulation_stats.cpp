#include "accumulation_stats.hpp"

#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>
#include <torch/csrc/autograd/variable.h>

#include <chrono>

#include "gradient_slot.hpp"

namespace keel::probe {
namespace {

// Measured in the hook up to one chunk of the passes (128 KB of float32), which a core's L2
// still holds when the hook runs, and which one kernel call measures as the pass would. A
// larger tensor is measured by the pass, where its one walk is nothing beside its values.
constexpr int64_t kMaxHookElems = kFusedChunkElems;
constexpr uint32_t kTimedEvery = 8;

bool small_dense_cpu_float(const torch::Tensor& t) {
  // is_sparse() first: is_contiguous() throws on a sparse tensor.
  return t.defined() && t.device().is_cpu() && t.scalar_type() == torch::kFloat && !t.is_sparse() &&
         t.is_contiguous() && !t.is_inference() && t.numel() <= kMaxHookElems;
}

uint32_t version_of(const torch::Tensor& t) { return t.unsafeGetTensorImpl()->version_counter().current_version(); }

// Where a tensor's elements are, read from its TensorImpl alone: the storage it points into
// (compared, never followed: unsafe_storage() neither throws nor reads it) and where in it.
// Its data pointer would be one more object (the StorageImpl) to wait on per tensor in take().
// What moves the elements goes through the TensorImpl: set_data and set_ swap the storage,
// resize_ changes the count. (A storage whose own buffer is swapped in place is FSDP's flat
// parameters on a device, not a small CPU gradient.)
AccumulationStats::Placement placement_of(const torch::Tensor& t) {
  const c10::TensorImpl& impl = *t.unsafeGetTensorImpl();
  return {impl.unsafe_storage().unsafeGetStorageImpl(), impl.storage_offset(), impl.numel()};
}

}  // namespace

class AccumulationStats::Hook final : public torch::autograd::FunctionPostHook {
 public:
  Hook(std::shared_ptr<Shared> shared, size_t layer, const torch::autograd::AccumulateGrad* accumulator)
      : shared_(std::move(shared)), layer_(layer), accumulator_(accumulator) {}

  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list& /*inputs*/) override {
    Shared& s = *shared_;
    prefetch_for_later_hook(s);
    if (s.overtaken[layer_].load(std::memory_order_relaxed)) return outputs;
    Measured& m = s.measured[layer_];
    m.grad = nullptr;   // until this measurement is whole: a failed one leaves nothing to take
    try {
      measure(s, m);
    } catch (...) {
      m.grad = nullptr;   // the pass measures it, as any layer whose hook found nothing
    }
    return outputs;
  }

 private:
  // A model whose layers do not fit in cache has evicted each layer's results since the last
  // step's pass read them, and the hook's first store to them waited on memory: in the 2,000-
  // tensor bench the hooks' time fell from 200-218 to 136-155 ns a tensor (three interleaved
  // pairs of runs) when each asked for those of the layer four hooks later. Backward reaches
  // the layers in about the reverse of their registered order (a sequential model's exactly);
  // where it does not, one prefetch is wasted.
  void prefetch_for_later_hook(Shared& s) const {
    constexpr size_t kAhead = 4;
    if (layer_ < kAhead) return;
    const char* later = reinterpret_cast<const char*>(&s.measured[layer_ - kAhead]);
    static_assert(sizeof(Measured) == 128, "a layer's results are two cache lines");
    __builtin_prefetch(later, 1);
    __builtin_prefetch(later + 64, 1);
  }

  void measure(Shared& s, Measured& m) const {
    // The accumulator owns this hook, so it outlives every call; its variable is the parameter.
    const torch::Tensor& weight = accumulator_->variable;
    const GradientSlot slot = gradient_slot(weight);
    if (!slot.has_grad() || !small_dense_cpu_float(*slot.grad)) return;
    const torch::Tensor& grad = *slot.grad;
    const bool weighs = s.weighs.load(std::memory_order_relaxed) && small_dense_cpu_float(weight) &&
                        weight.numel() == grad.numel();
    // Counted with a plain load and store, not a read-modify-write: a locked instruction waits
    // for every store before it to reach the cache, and this hook's first store (m.grad) is to
    // a line a model of 50,000 tensors has long evicted: perf put 87% of the hook's own samples
    // on that wait. Two backward passes at once may lose a count or a sample between them:
    // only the sampling's phase moves.
    const uint32_t count = s.measurements.load(std::memory_order_relaxed);
    s.measurements.store(count + 1, std::memory_order_relaxed);
    const bool timed = count % kTimedEvery == 0;
    const auto start = timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    m.stats = grad_stats_of_chunk(grad.data_ptr<float>(), grad.numel());
    m.weighed = weighs;
    if (weighs) {
      m.weight_sumsq = sumsq_of_chunk(weight.data_ptr<float>(), weight.numel());
      m.weight_at = placement_of(weight);
      m.weight_version = version_of(weight);
    }
    m.grad_at = placement_of(grad);
    m.grad_version = version_of(grad);
    m.epoch = s.epoch.load(std::memory_order_relaxed);
    m.grad = grad.unsafeGetTensorImpl();   // last: the measurement is whole
    if (timed) {
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start);
      // As the count: a plain add (take_hook_us's exchange is the training thread's, between
      // backward passes).
      s.hook_ns.store(s.hook_ns.load(std::memory_order_relaxed) + static_cast<int64_t>(ns.count()) * kTimedEvery,
                      std::memory_order_relaxed);
    }
  }

  std::shared_ptr<Shared> shared_;
  size_t layer_;
  const torch::autograd::AccumulateGrad* accumulator_;
};

AccumulationStats::AccumulationStats(const std::vector<torch::Tensor>& params, bool hook,
                                     const std::vector<bool>& swapped)
    : params_(params), shared_(std::make_shared<Shared>(params.size())), accumulators_(params.size()),
      keys_(params.size(), 0) {
  for (size_t i = 0; hook && i < params_.size(); ++i) {
    const torch::Tensor& p = params_[i];
    if (!hookable(p)) continue;
    if (!swapped.empty() && swapped[i]) continue;
    try {
      Accumulator node = torch::autograd::impl::grad_accumulator(p);
      const auto* accumulator = dynamic_cast<const torch::autograd::AccumulateGrad*>(node.get());
      if (accumulator == nullptr) continue;
      keys_[i] = node->add_post_hook(std::make_unique<Hook>(shared_, i, accumulator));
      accumulators_[i] = std::move(node);
    } catch (const std::exception&) {
      // Left to the pass.
    }
  }
}

void AccumulationStats::remove_hooks() noexcept {
  for (size_t i = 0; i < accumulators_.size(); ++i) {
    if (accumulators_[i]) accumulators_[i]->del_post_hook(keys_[i]);
  }
  accumulators_.clear();
}

void AccumulationStats::take_over(AccumulationStats& other) noexcept {
  // The hooks hold the shared state, not this object: they follow it as they are.
  params_ = std::move(other.params_);
  shared_ = std::move(other.shared_);
  accumulators_ = std::move(other.accumulators_);
  keys_ = std::move(other.keys_);
  other.accumulators_.clear();
}

bool AccumulationStats::hookable(const torch::Tensor& param) {
  return param.requires_grad() && param.is_leaf() && small_dense_cpu_float(param);
}

bool AccumulationStats::take(size_t layer, const torch::Tensor& grad, bool with_weight, GradStats& stats,
                             double& weight_sumsq) {
  Shared& s = *shared_;
  if (!accumulators_[layer] || s.overtaken[layer].load(std::memory_order_relaxed)) return false;
  const Measured& m = s.measured[layer];
  if (m.grad == nullptr || m.epoch != s.epoch.load(std::memory_order_relaxed)) return false;
  if (with_weight && !m.weighed) return false;   // the step before did not read W: the hooks start now
  const torch::Tensor& weight = params_[layer];
  // The gradient and the weight the hook measured, where it measured them, written by nothing
  // since (every in-place op bumps the version; the probe's own unscale never runs on a step
  // that takes these, unscale being 1).
  const bool untouched = m.grad == grad.unsafeGetTensorImpl() && m.grad_at == placement_of(grad) &&
                         m.grad_version == version_of(grad) &&
                         (!with_weight || (m.weight_at == placement_of(weight) && m.weight_version == version_of(weight)));
  if (!untouched) {
    s.overtaken[layer].store(true, std::memory_order_relaxed);
    return false;
  }
  stats = m.stats;
  weight_sumsq = m.weight_sumsq;
  return true;
}

double AccumulationStats::take_hook_us() {
  return static_cast<double>(shared_->hook_ns.exchange(0, std::memory_order_relaxed)) / 1000.0;
}

}  // namespace keel::probe
