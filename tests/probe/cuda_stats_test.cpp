// The gradient pass's CUDA kernels (probe/src/cuda/multi_tensor_stats.cu) on a real device,
// against the same math run on the host: every element type, special values, tensors that
// cross chunk boundaries, the fused unscale (bit for bit), and results that repeat exactly.
// Likewise the watched tensor's kernel (watch_stats.cu).
// Where there is no CUDA device every test reports as skipped, with the reason.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cuda/chunk_plan.hpp"
#include "cuda/multi_tensor_stats.hpp"
#include "cuda/stats_math.hpp"
#include "cuda/watch_stats.hpp"

namespace {

using namespace keel::probe::cuda;

std::string no_device_reason() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) return std::string("no CUDA device: ") + cudaGetErrorString(error);
  if (count == 0) return "no CUDA device: cudaGetDeviceCount found 0";
  return "";
}

#define SKIP_WITHOUT_DEVICE()                               \
  do {                                                      \
    const std::string reason = no_device_reason();          \
    if (!reason.empty()) GTEST_SKIP() << reason;            \
  } while (0)

#define ASSERT_CUDA(call) ASSERT_EQ((call), cudaSuccess) << #call

// One host tensor of any element type, as raw bytes.
struct HostTensor {
  ElementType type;
  std::vector<unsigned char> bytes;
  int64_t numel;
};

size_t element_size(ElementType type) {
  switch (type) {
    case ElementType::kFloat32: return 4;
    case ElementType::kFloat64: return 8;
    case ElementType::kBFloat16:
    case ElementType::kFloat16: return 2;
  }
  return 0;
}

HostTensor make_tensor(ElementType type, const std::vector<double>& values) {
  HostTensor t{type, std::vector<unsigned char>(values.size() * element_size(type)),
               static_cast<int64_t>(values.size())};
  for (size_t i = 0; i < values.size(); ++i) {
    unsigned char* at = t.bytes.data() + i * element_size(type);
    switch (type) {
      case ElementType::kFloat32: { const float v = static_cast<float>(values[i]); std::memcpy(at, &v, 4); break; }
      case ElementType::kFloat64: std::memcpy(at, &values[i], 8); break;
      case ElementType::kBFloat16: { const uint16_t v = float_to_bf16(static_cast<float>(values[i])); std::memcpy(at, &v, 2); break; }
      case ElementType::kFloat16: { const uint16_t v = float_to_half(static_cast<float>(values[i])); std::memcpy(at, &v, 2); break; }
    }
  }
  return t;
}

// The element's value widened to fp64.
double value_at(const HostTensor& t, int64_t i) {
  const unsigned char* at = t.bytes.data() + static_cast<size_t>(i) * element_size(t.type);
  switch (t.type) {
    case ElementType::kFloat32: { float v; std::memcpy(&v, at, 4); return v; }
    case ElementType::kFloat64: { double v; std::memcpy(&v, at, 8); return v; }
    case ElementType::kBFloat16: { uint16_t v; std::memcpy(&v, at, 2); return bf16_to_float(v); }
    case ElementType::kFloat16: { uint16_t v; std::memcpy(&v, at, 2); return half_to_float(v); }
  }
  return 0;
}

// Index of the first element whose bits differ, or -1. A NaN matches any NaN: its payload is
// the hardware's choice (a GPU's multiply returns its own canonical NaN, x86 keeps the input's).
int64_t first_difference(const HostTensor& a, const HostTensor& b) {
  const size_t size = element_size(a.type);
  for (int64_t i = 0; i < a.numel; ++i) {
    if (std::memcmp(a.bytes.data() + i * size, b.bytes.data() + i * size, size) == 0) continue;
    if (std::isnan(value_at(a, i)) && std::isnan(value_at(b, i))) continue;
    return i;
  }
  return -1;
}

// The host's run of the same math over a whole tensor (one pass; unscaling `t` in place).
GradAccumulator host_stats(HostTensor& t, float inv_scale) {
  void* data = t.bytes.data();
  switch (t.type) {
    case ElementType::kFloat32: return grad_range<ElementType::kFloat32>(static_cast<float*>(data), 0, t.numel, 0, 1, inv_scale);
    case ElementType::kFloat64: return grad_range<ElementType::kFloat64>(static_cast<double*>(data), 0, t.numel, 0, 1, inv_scale);
    case ElementType::kBFloat16: return grad_range<ElementType::kBFloat16>(static_cast<uint16_t*>(data), 0, t.numel, 0, 1, inv_scale);
    case ElementType::kFloat16: return grad_range<ElementType::kFloat16>(static_cast<uint16_t*>(data), 0, t.numel, 0, 1, inv_scale);
  }
  return {};
}

// Runs the device pass over copies of `tensors`; returns the per-tensor results and leaves the
// device's (possibly unscaled) data in `after`.
void device_stats(const std::vector<HostTensor>& tensors, float inv_scale, std::vector<GradAccumulator>& out,
                  std::vector<HostTensor>& after) {
  std::vector<int64_t> numels;
  for (const auto& t : tensors) numels.push_back(t.numel);
  const ChunkPlan plan = plan_chunks(numels);
  std::vector<TensorRef> refs(tensors.size());
  std::vector<void*> buffers(tensors.size(), nullptr);
  for (size_t i = 0; i < tensors.size(); ++i) {
    ASSERT_CUDA(cudaMalloc(&buffers[i], std::max<size_t>(tensors[i].bytes.size(), 1)));
    ASSERT_CUDA(cudaMemcpy(buffers[i], tensors[i].bytes.data(), tensors[i].bytes.size(), cudaMemcpyHostToDevice));
    refs[i] = TensorRef{buffers[i], tensors[i].numel, tensors[i].type, 0};
  }
  GradPass pass;
  void *d_refs, *d_chunks, *d_where, *d_partials, *d_out;
  ASSERT_CUDA(cudaMalloc(&d_refs, refs.size() * sizeof(TensorRef)));
  ASSERT_CUDA(cudaMalloc(&d_chunks, std::max<size_t>(plan.chunks.size(), 1) * sizeof(Chunk)));
  ASSERT_CUDA(cudaMalloc(&d_where, plan.tensors.size() * sizeof(TensorChunks)));
  ASSERT_CUDA(cudaMalloc(&d_partials, std::max<size_t>(plan.chunks.size(), 1) * sizeof(GradAccumulator)));
  ASSERT_CUDA(cudaMalloc(&d_out, tensors.size() * sizeof(GradAccumulator)));
  ASSERT_CUDA(cudaMemcpy(d_refs, refs.data(), refs.size() * sizeof(TensorRef), cudaMemcpyHostToDevice));
  ASSERT_CUDA(cudaMemcpy(d_chunks, plan.chunks.data(), plan.chunks.size() * sizeof(Chunk), cudaMemcpyHostToDevice));
  ASSERT_CUDA(cudaMemcpy(d_where, plan.tensors.data(), plan.tensors.size() * sizeof(TensorChunks), cudaMemcpyHostToDevice));
  pass.tensors = static_cast<const TensorRef*>(d_refs);
  pass.chunks = static_cast<const Chunk*>(d_chunks);
  pass.where = static_cast<const TensorChunks*>(d_where);
  pass.partials = static_cast<GradAccumulator*>(d_partials);
  pass.out = static_cast<GradAccumulator*>(d_out);
  pass.tensor_count = static_cast<int32_t>(tensors.size());
  pass.chunk_count = static_cast<int32_t>(plan.chunks.size());
  cudaStream_t stream;
  ASSERT_CUDA(cudaStreamCreate(&stream));
  ASSERT_EQ(enqueue_grad_stats(pass, inv_scale, stream), 0);
  out.assign(tensors.size(), GradAccumulator{});
  ASSERT_CUDA(cudaMemcpyAsync(out.data(), d_out, out.size() * sizeof(GradAccumulator), cudaMemcpyDeviceToHost, stream));
  ASSERT_CUDA(cudaStreamSynchronize(stream));
  after = tensors;
  for (size_t i = 0; i < tensors.size(); ++i) {
    ASSERT_CUDA(cudaMemcpy(after[i].bytes.data(), buffers[i], after[i].bytes.size(), cudaMemcpyDeviceToHost));
    cudaFree(buffers[i]);
  }
  for (void* p : {d_refs, d_chunks, d_where, d_partials, d_out}) cudaFree(p);
  cudaStreamDestroy(stream);
}

std::vector<HostTensor> mixed_tensors() {
  std::mt19937 rng(5);
  std::normal_distribution<double> normal(0.0, 1.0);
  auto values = [&](int64_t n, double scale) {
    std::vector<double> v(static_cast<size_t>(n));
    for (double& x : v) x = normal(rng) * scale;
    return v;
  };
  std::vector<HostTensor> tensors;
  auto big = values(2 * kChunkElements + 3, 1e-3);          // crosses two chunk boundaries
  big[kChunkElements] = 0.0;
  big[kChunkElements + 1] = -0.0;
  tensors.push_back(make_tensor(ElementType::kFloat32, big));
  tensors.push_back(make_tensor(ElementType::kFloat32, {}));                  // empty
  auto poisoned = values(5000, 1e28);                                         // squares above FLT_MAX
  poisoned[4999] = std::numeric_limits<double>::quiet_NaN();
  tensors.push_back(make_tensor(ElementType::kFloat32, poisoned));
  auto tiny = values(777, 1e-30);                                              // squares below FLT_MIN
  tensors.push_back(make_tensor(ElementType::kFloat32, tiny));
  auto bf16 = values(kChunkElements + 1, 10.0);
  bf16[3] = std::numeric_limits<double>::infinity();
  tensors.push_back(make_tensor(ElementType::kBFloat16, bf16));
  tensors.push_back(make_tensor(ElementType::kFloat16, values(12345, 100.0)));
  tensors.push_back(make_tensor(ElementType::kFloat64, values(3000, 1e100)));
  tensors.push_back(make_tensor(ElementType::kFloat32, {42.0}));             // one element
  return tensors;
}

void expect_same_stats(const GradAccumulator& device, const GradAccumulator& host, size_t tensor) {
  SCOPED_TRACE("tensor " + std::to_string(tensor));
  EXPECT_EQ(device.absmax_bits, host.absmax_bits);
  EXPECT_EQ(device.nonfinite, host.nonfinite);
  EXPECT_EQ(device.zeros, host.zeros);
  if (std::isfinite(host.sumsq)) {
    EXPECT_NEAR(device.sumsq, host.sumsq, std::fabs(host.sumsq) * 1e-12);   // only the order differs
  } else {
    EXPECT_EQ(std::isnan(device.sumsq), std::isnan(host.sumsq));
    if (!std::isnan(host.sumsq)) {
      EXPECT_EQ(device.sumsq, host.sumsq);
    }
  }
}

TEST(CudaGradStats, EveryElementTypeMatchesTheHostMath) {
  SKIP_WITHOUT_DEVICE();
  std::vector<HostTensor> tensors = mixed_tensors();
  std::vector<GradAccumulator> device;
  std::vector<HostTensor> after;
  device_stats(tensors, 1.0f, device, after);
  for (size_t i = 0; i < tensors.size(); ++i) {
    expect_same_stats(device[i], host_stats(tensors[i], 1.0f), i);
    EXPECT_EQ(after[i].bytes, tensors[i].bytes) << "read-only pass changed tensor " << i;
  }
}

TEST(CudaGradStats, UnscaleWritesTheSameBitsAsTheHost) {
  SKIP_WITHOUT_DEVICE();
  const float inv_scale = 3.0f / 65536.0f;
  std::vector<HostTensor> tensors = mixed_tensors();
  std::vector<GradAccumulator> device;
  std::vector<HostTensor> after;
  device_stats(tensors, inv_scale, device, after);
  for (size_t i = 0; i < tensors.size(); ++i) {
    HostTensor host = tensors[i];
    expect_same_stats(device[i], host_stats(host, inv_scale), i);
    ASSERT_EQ(after[i].bytes.size(), host.bytes.size());
    const int64_t at = first_difference(after[i], host);
    EXPECT_EQ(at, -1) << "unscaled values differ in tensor " << i << " at element " << at << ": device "
                      << (at >= 0 ? value_at(after[i], at) : 0) << ", host " << (at >= 0 ? value_at(host, at) : 0);
  }
}

TEST(CudaGradStats, ResultsRepeatBitForBit) {
  SKIP_WITHOUT_DEVICE();
  const std::vector<HostTensor> tensors = mixed_tensors();
  std::vector<GradAccumulator> first, second;
  std::vector<HostTensor> after;
  device_stats(tensors, 1.0f, first, after);
  device_stats(tensors, 1.0f, second, after);
  ASSERT_EQ(first.size(), second.size());
  EXPECT_EQ(std::memcmp(first.data(), second.data(), first.size() * sizeof(GradAccumulator)), 0);
}

// The watch kernel's result for a [rows, cols] tensor.
void device_watch(const HostTensor& t, int64_t rows, int64_t cols, WatchTotals& out) {
  void *data = nullptr, *row_out = nullptr, *d_out = nullptr;
  ASSERT_CUDA(cudaMalloc(&data, std::max<size_t>(t.bytes.size(), 1)));
  ASSERT_CUDA(cudaMemcpy(data, t.bytes.data(), t.bytes.size(), cudaMemcpyHostToDevice));
  ASSERT_CUDA(cudaMalloc(&row_out, std::max<int64_t>(rows, 1) * sizeof(RowStats)));
  ASSERT_CUDA(cudaMalloc(&d_out, sizeof(WatchTotals)));
  WatchPass pass;
  pass.data = data;
  pass.type = t.type;
  pass.rows = rows;
  pass.cols = cols;
  pass.row_out = static_cast<RowStats*>(row_out);
  pass.out = static_cast<WatchTotals*>(d_out);
  ASSERT_EQ(enqueue_watch_stats(pass, nullptr), 0);
  ASSERT_CUDA(cudaMemcpy(&out, d_out, sizeof(WatchTotals), cudaMemcpyDeviceToHost));
  for (void* p : {data, row_out, d_out}) ASSERT_CUDA(cudaFree(p));
}

WatchTotals host_watch(const HostTensor& t, int64_t rows, int64_t cols) {
  WatchTotals totals;
  const void* data = t.bytes.data();
  for (int64_t r = 0; r < rows; ++r) {
    switch (t.type) {
      case ElementType::kFloat32: totals.fold(row_range<ElementType::kFloat32>(static_cast<const float*>(data), r * cols, (r + 1) * cols, 0, 1)); break;
      case ElementType::kFloat64: totals.fold(row_range<ElementType::kFloat64>(static_cast<const double*>(data), r * cols, (r + 1) * cols, 0, 1)); break;
      case ElementType::kBFloat16: totals.fold(row_range<ElementType::kBFloat16>(static_cast<const uint16_t*>(data), r * cols, (r + 1) * cols, 0, 1)); break;
      case ElementType::kFloat16: totals.fold(row_range<ElementType::kFloat16>(static_cast<const uint16_t*>(data), r * cols, (r + 1) * cols, 0, 1)); break;
    }
  }
  return totals;
}

// Logits-like rows (a vocabulary of 5,003 columns, wider than a block), one row with a NaN and
// one with +Inf: the absmax, sum of squares and counts exactly as the host folds them (fp64
// sums in the same per-row order are not promised, so to 1e-12), log-sum-exp to fp32 rounding
// (the device's expf is not the host's), and the same bits when run again.
TEST(CudaWatchStats, EveryElementTypeMatchesTheHostMath) {
  SKIP_WITHOUT_DEVICE();
  const int64_t rows = 37, cols = 5003;
  std::mt19937 rng(5);
  std::normal_distribution<double> logits(0.0, 4.0);
  std::vector<double> values(static_cast<size_t>(rows * cols));
  for (double& v : values) v = logits(rng);
  values[static_cast<size_t>(3 * cols + 17)] = std::numeric_limits<double>::quiet_NaN();
  values[static_cast<size_t>(9 * cols + 4000)] = std::numeric_limits<double>::infinity();
  for (ElementType type : {ElementType::kFloat32, ElementType::kFloat64, ElementType::kBFloat16, ElementType::kFloat16}) {
    SCOPED_TRACE(static_cast<int>(type));
    const HostTensor t = make_tensor(type, values);
    WatchTotals device, again;
    device_watch(t, rows, cols, device);
    device_watch(t, rows, cols, again);
    const WatchTotals host = host_watch(t, rows, cols);
    EXPECT_EQ(device.rows, host.rows);
    EXPECT_EQ(device.values.absmax_bits, host.values.absmax_bits);
    EXPECT_EQ(device.values.nonfinite, host.values.nonfinite);
    EXPECT_EQ(device.values.zeros, host.values.zeros);
    // The NaN makes both sums of squares NaN (seen on an H100, where EXPECT_NEAR failed on it).
    if (std::isnan(host.values.sumsq)) {
      EXPECT_TRUE(std::isnan(device.values.sumsq));
    } else {
      EXPECT_NEAR(device.values.sumsq, host.values.sumsq, 1e-12 * host.values.sumsq);
    }
    // The NaN row makes the sum NaN, as torch.logsumexp(-1).sum() would.
    EXPECT_TRUE(std::isnan(device.lse_sum) && std::isnan(host.lse_sum));
    EXPECT_EQ(std::memcmp(&device, &again, sizeof device), 0) << "not repeatable";
  }
  // Without the special rows, the log-sum-exp sum itself.
  values[static_cast<size_t>(3 * cols + 17)] = 0.5;
  values[static_cast<size_t>(9 * cols + 4000)] = 0.5;
  for (ElementType type : {ElementType::kFloat32, ElementType::kBFloat16}) {
    const HostTensor t = make_tensor(type, values);
    WatchTotals device;
    device_watch(t, rows, cols, device);
    const WatchTotals host = host_watch(t, rows, cols);
    EXPECT_NEAR(device.lse_sum, host.lse_sum, 1e-5 * std::fabs(host.lse_sum)) << static_cast<int>(type);
  }
}

}  // namespace
