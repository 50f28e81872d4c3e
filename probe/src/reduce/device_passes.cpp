// The CUDA passes (built with KEEL_PROBE_CUDA): tables and buffers in libtorch's caching
// allocators, work on libtorch's current stream, results read behind an event (a wait only
// when it has not passed).
#include "device_passes.hpp"

#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <cstring>
#include <stdexcept>
#include <string>

#include "cuda/chunk_plan.hpp"
#include "cuda/multi_tensor_stats.hpp"
#include "cuda/watch_stats.hpp"

namespace keel::probe {
namespace {

namespace kc = keel::probe::cuda;

bool element_type_of(torch::ScalarType type, kc::ElementType& out) {
  switch (type) {
    case torch::kFloat: out = kc::ElementType::kFloat32; return true;
    case torch::kDouble: out = kc::ElementType::kFloat64; return true;
    case torch::kBFloat16: out = kc::ElementType::kBFloat16; return true;
    case torch::kHalf: out = kc::ElementType::kFloat16; return true;
    default: return false;
  }
}

kc::ElementType element_type(const torch::Tensor& t) {
  kc::ElementType type;
  if (!element_type_of(t.scalar_type(), type)) throw std::runtime_error("keel: a device pass got an unsupported type");
  return type;
}

torch::Tensor device_bytes(size_t bytes, const torch::Device& device) {
  return torch::empty({static_cast<int64_t>(std::max<size_t>(bytes, 1))},
                      torch::TensorOptions().dtype(torch::kByte).device(device));
}

torch::Tensor pinned_bytes(size_t bytes) {
  return torch::empty({static_cast<int64_t>(std::max<size_t>(bytes, 1))},
                      torch::TensorOptions().dtype(torch::kByte).pinned_memory(true));
}

// A device copy of `bytes` host bytes, uploaded asynchronously on the current stream. The
// staging buffer is pinned memory from libtorch's caching host allocator, which keeps it from
// reuse until the copy has run, so nothing here waits.
torch::Tensor upload(const void* data, size_t bytes, const torch::Device& device) {
  auto staging = pinned_bytes(bytes);
  std::memcpy(staging.data_ptr(), data, bytes);
  auto on_device = device_bytes(bytes, device);
  on_device.copy_(staging, /*non_blocking=*/true);
  return on_device;
}

// Waits for `event` unless it has passed. A real wait is reported to c10's sync debug mode, as
// c10's own stream and device synchronisations are, so keel-bench-gpu counts it.
void wait_for(at::cuda::CUDAEvent& event) {
  if (event.query()) return;
  if (c10::cuda::warning_state().get_sync_debug_mode() != c10::cuda::SyncDebugMode::L_DISABLED) {
    c10::cuda::warn_or_error_on_sync();
  }
  event.synchronize();
}

// What both passes share: the chunk plan (rebuilt when the element counts change), the
// tensor table (uploaded when a row changes), device scratch and results, the results' copy
// into pinned memory and the one wait. Ref is the table's row, Accumulator the result's.
template <class Ref, class Accumulator>
class TablePass {
 public:
  explicit TablePass(int device_index)
      : device_(torch::kCUDA, static_cast<c10::DeviceIndex>(device_index)),
        stream_(c10::cuda::getCurrentCUDAStream(device_.index())) {}

  const torch::Device& device() const { return device_; }

  // `rows` is this step's table; `launch` enqueues the kernels on the stream given the
  // device buffers and returns a CUDA error code.
  template <class Launch>
  void enqueue(const std::vector<Ref>& rows, const std::vector<int64_t>& numels, Launch launch) {
    c10::cuda::CUDAGuard guard(device_);
    if (numels != planned_numels_) plan(numels);
    if (rows.size() != uploaded_.size() || std::memcmp(rows.data(), uploaded_.data(), rows.size() * sizeof(Ref)) != 0) {
      table_ = upload(rows.data(), rows.size() * sizeof(Ref), device_);
      uploaded_ = rows;
    }
    kc::MultiTensorPass<Ref, Accumulator> pass;
    pass.tensors = static_cast<const Ref*>(table_.data_ptr());
    pass.chunks = static_cast<const kc::Chunk*>(chunks_.data_ptr());
    pass.where = static_cast<const kc::TensorChunks*>(where_.data_ptr());
    pass.partials = static_cast<Accumulator*>(partials_.data_ptr());
    pass.out = static_cast<Accumulator*>(out_.data_ptr());
    pass.tensor_count = static_cast<int32_t>(rows.size());
    pass.chunk_count = chunk_count_;
    stream_ = c10::cuda::getCurrentCUDAStream(device_.index());
    const int error = launch(pass, stream_.stream());
    if (error != 0) throw std::runtime_error(std::string("keel: device pass launch failed: ") + kc::cuda_error_text(error));
    pending_ = rows.size();
  }

  // The device results of the last enqueue (for the verdict, which reads them there).
  const Accumulator* device_results() const { return static_cast<const Accumulator*>(out_.data_ptr()); }
  const c10::cuda::CUDAStream& stream() const { return stream_; }

  // One copy of every tensor's result, on the same stream, into pinned memory, then the event
  // that says it (and everything enqueued before it) is done.
  void finish() {
    c10::cuda::CUDAGuard guard(device_);
    out_host_.copy_(out_, /*non_blocking=*/true);
    done_.record(stream_);
  }

  // The last finish's results, waiting only if they have not arrived.
  const Accumulator* collect(size_t& count) {
    wait_for(done_);
    count = pending_;
    return static_cast<const Accumulator*>(out_host_.data_ptr());
  }

 private:
  void plan(const std::vector<int64_t>& numels) {
    const kc::ChunkPlan chunks = kc::plan_chunks(numels);
    if (chunks.chunks.size() > static_cast<size_t>(INT32_MAX)) throw std::runtime_error("keel: too many chunks");
    chunk_count_ = static_cast<int32_t>(chunks.chunks.size());
    chunks_ = upload(chunks.chunks.data(), chunks.chunks.size() * sizeof(kc::Chunk), device_);
    where_ = upload(chunks.tensors.data(), chunks.tensors.size() * sizeof(kc::TensorChunks), device_);
    partials_ = device_bytes(chunks.chunks.size() * sizeof(Accumulator), device_);
    out_ = device_bytes(numels.size() * sizeof(Accumulator), device_);
    out_host_ = pinned_bytes(numels.size() * sizeof(Accumulator));
    planned_numels_ = numels;
  }

  torch::Device device_;
  c10::cuda::CUDAStream stream_;
  std::vector<int64_t> planned_numels_;
  std::vector<Ref> uploaded_;
  int32_t chunk_count_ = 0;
  torch::Tensor table_, chunks_, where_, partials_, out_, out_host_;
  at::cuda::CUDAEvent done_;
  size_t pending_ = 0;
};

class CudaGradPass final : public DeviceGradPass {
 public:
  explicit CudaGradPass(int device_index) : table_(device_index) {}

  void enqueue(const std::vector<torch::Tensor>& grads, float unscale) override {
    rows_.clear();
    numels_.clear();
    for (const auto& g : grads) {
      kc::TensorRef ref;
      ref.type = element_type(g);
      ref.data = g.data_ptr();
      ref.numel = g.numel();
      rows_.push_back(ref);
      numels_.push_back(g.numel());
    }
    table_.enqueue(rows_, numels_, [unscale](const kc::GradPass& pass, cudaStream_t stream) {
      return kc::enqueue_grad_stats(pass, unscale, stream);
    });
  }

  void finish(const VerdictRequest* verdict) override {
    verdict_pending_ = verdict != nullptr;
    if (verdict) {
      c10::cuda::CUDAGuard guard(table_.device());
      if (!verdict_.defined()) {
        // [0] the verdict, [1] whether a gradient value was non-finite (enqueue_step_verdict).
        verdict_ = torch::zeros({2}, torch::TensorOptions().dtype(torch::kFloat).device(table_.device()));
        verdict_host_ = torch::zeros({2}, torch::TensorOptions().dtype(torch::kFloat).pinned_memory(true));
      }
      const torch::Tensor& loss = verdict->loss;
      if (loss.defined() && (loss.scalar_type() != torch::kFloat || loss.device() != table_.device() || loss.numel() != 1)) {
        throw std::runtime_error("keel: the verdict's loss must be one float32 value on the pass's device");
      }
      const int error = kc::enqueue_step_verdict(table_.device_results(), static_cast<int32_t>(rows_.size()),
                                                 loss.defined() ? loss.data_ptr<float>() : nullptr, verdict->max_sumsq,
                                                 verdict_.data_ptr<float>(), table_.stream().stream());
      if (error != 0) throw std::runtime_error(std::string("keel: verdict launch failed: ") + kc::cuda_error_text(error));
      verdict_host_.copy_(verdict_, /*non_blocking=*/true);
      if (verdict->after_verdict) verdict->after_verdict(verdict_.narrow(0, 1, 1));
    }
    table_.finish();
  }

  torch::Tensor found_inf() const override { return verdict_.narrow(0, 0, 1); }

  float collected_found_inf() const override {
    if (!verdict_pending_) throw std::logic_error("keel: no verdict was asked for");
    return verdict_host_.data_ptr<float>()[0];
  }

  void collect(std::vector<GradStats>& out) override {
    size_t count = 0;
    const kc::GradAccumulator* results = table_.collect(count);
    out.resize(count);
    for (size_t k = 0; k < count; ++k) {
      out[k].sumsq = results[k].sumsq;
      out[k].absmax = static_cast<float>(results[k].absmax());
      out[k].nonfinite = static_cast<int64_t>(results[k].nonfinite);
      out[k].zeros = static_cast<int64_t>(results[k].zeros);
    }
  }

 private:
  TablePass<kc::TensorRef, kc::GradAccumulator> table_;
  std::vector<kc::TensorRef> rows_;
  std::vector<int64_t> numels_;
  torch::Tensor verdict_, verdict_host_;
  bool verdict_pending_ = false;
};

// A rule's tensor as the update kernel reads it: the weight's type, size and device, dense.
const void* rule_input(const torch::Tensor& t, const torch::Tensor& weight) {
  if (!t.defined()) return nullptr;
  if (t.scalar_type() != weight.scalar_type() || t.numel() != weight.numel() || t.device() != weight.device() ||
      t.is_sparse() || !t.is_contiguous()) {
    throw std::runtime_error("keel: optimizer state does not match its weight's type, size or layout");
  }
  return t.data_ptr();
}

class CudaUpdatePass final : public DeviceUpdatePass {
 public:
  explicit CudaUpdatePass(int device_index) : table_(device_index) {}

  void enqueue(const std::vector<torch::Tensor>& weights, const std::vector<const LayerUpdateRule*>& rules) override {
    rows_.clear();
    numels_.clear();
    for (size_t k = 0; k < weights.size(); ++k) {
      const auto& w = weights[k];
      kc::UpdateRef ref;
      ref.type = element_type(w);
      ref.weight = w.data_ptr();
      ref.first = rule_input(rules[k]->first, w);
      ref.second = rule_input(rules[k]->second, w);
      if (ref.first == nullptr) ref.first = ref.weight;   // the zero update reads nothing but W
      ref.numel = w.numel();
      ref.coefficients = rules[k]->coefficients;
      rows_.push_back(ref);
      numels_.push_back(w.numel());
    }
    table_.enqueue(rows_, numels_, [](const kc::UpdatePass& pass, cudaStream_t stream) {
      return kc::enqueue_update_stats(pass, stream);
    });
    table_.finish();
  }

  void collect(std::vector<UpdateStats>& out) override {
    size_t count = 0;
    const kc::UpdateAccumulator* results = table_.collect(count);
    out.resize(count);
    for (size_t k = 0; k < count; ++k) {
      out[k] = UpdateStats{results[k].update_sumsq, results[k].old_sumsq, results[k].new_sumsq};
    }
  }

 private:
  TablePass<kc::UpdateRef, kc::UpdateAccumulator> table_;
  std::vector<kc::UpdateRef> rows_;
  std::vector<int64_t> numels_;
};

class CudaWatch final : public DeviceWatch {
 public:
  explicit CudaWatch(int device_index) : device_(torch::kCUDA, static_cast<c10::DeviceIndex>(device_index)) {}

  void enqueue(const torch::Tensor& t) override {
    c10::cuda::CUDAGuard guard(device_);
    const int64_t cols = t.size(-1);
    const int64_t rows = t.numel() / cols;
    if (rows > row_capacity_) {
      rows_ = device_bytes(static_cast<size_t>(rows) * sizeof(kc::RowStats), device_);
      row_capacity_ = rows;
    }
    if (!out_.defined()) {
      out_ = device_bytes(sizeof(kc::WatchTotals), device_);
      out_host_ = pinned_bytes(sizeof(kc::WatchTotals));
    }
    kc::WatchPass pass;
    pass.data = t.data_ptr();
    pass.type = element_type(t);
    pass.rows = rows;
    pass.cols = cols;
    // No rows (a [0, n] tensor): nothing is allocated, and the fold writes zeros.
    pass.row_out = rows > 0 ? static_cast<kc::RowStats*>(rows_.data_ptr()) : nullptr;
    pass.out = static_cast<kc::WatchTotals*>(out_.data_ptr());
    const auto stream = c10::cuda::getCurrentCUDAStream(device_.index());
    const int error = kc::enqueue_watch_stats(pass, stream.stream());
    if (error != 0) throw std::runtime_error(std::string("keel: watch launch failed: ") + kc::cuda_error_text(error));
    out_host_.copy_(out_, /*non_blocking=*/true);
    done_.record(stream);
  }

  WatchResult collect() override {
    wait_for(done_);
    const auto* totals = static_cast<const kc::WatchTotals*>(out_host_.data_ptr());
    WatchResult r;
    r.absmax = totals->values.absmax();
    r.sumsq = totals->values.sumsq;
    r.lse_sum = totals->lse_sum;
    r.nonfinite = static_cast<int64_t>(totals->values.nonfinite);
    return r;
  }

 private:
  torch::Device device_;
  torch::Tensor rows_, out_, out_host_;
  int64_t row_capacity_ = 0;
  at::cuda::CUDAEvent done_;
};

}  // namespace

std::unique_ptr<DeviceGradPass> make_device_grad_pass(int device_index) {
  return std::make_unique<CudaGradPass>(device_index);
}

std::unique_ptr<DeviceWatch> make_device_watch(int device_index) { return std::make_unique<CudaWatch>(device_index); }

std::unique_ptr<DeviceUpdatePass> make_device_update_pass(int device_index) {
  return std::make_unique<CudaUpdatePass>(device_index);
}

bool device_pass_accepts(const torch::Tensor& t) {
  kc::ElementType type;
  // is_sparse() first: is_contiguous() throws on a sparse tensor.
  return t.defined() && t.is_cuda() && !t.is_sparse() && t.is_contiguous() && element_type_of(t.scalar_type(), type);
}

bool device_watch_accepts(const torch::Tensor& t) {
  if (!device_pass_accepts(t) || t.dim() < 1 || t.size(-1) < 1) return false;
  return t.numel() / t.size(-1) <= INT32_MAX;
}

}  // namespace keel::probe
