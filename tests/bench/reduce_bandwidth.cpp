// Measurement behind measure_reduce_bandwidth; see reduce_bandwidth.hpp.

#include "reduce_bandwidth.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "keel/probe/fused_reduce.hpp"

namespace keel::bench {
namespace {

constexpr int kTensors = 200;

// Tensor sizes that sum to `total` elements, shaped like a transformer's parameter list:
// per group of four, one large matrix, one medium one, and two tiny vectors (bias, norm).
std::vector<int64_t> model_like_sizes(int64_t total) {
  const int64_t tiny = std::min<int64_t>(256, total / (4 * kTensors));
  std::vector<int64_t> weight(kTensors, 0);
  int64_t weight_sum = 0;
  for (int i = 0; i < kTensors; ++i) {
    if (i % 4 == 0) weight[i] = 8 + (i * 37) % 9;  // uneven large matrices
    if (i % 4 == 1) weight[i] = 2;
    weight_sum += weight[i];
  }
  const int64_t shared = total - tiny * (kTensors / 2);
  std::vector<int64_t> sizes(kTensors);
  int64_t assigned = 0;
  for (int i = 0; i < kTensors; ++i) {
    sizes[i] = weight[i] == 0 ? tiny : shared * weight[i] / weight_sum;
    assigned += sizes[i];
  }
  sizes[0] += total - assigned;  // rounding remainder
  return sizes;
}

template <typename F>
double median_seconds(int repeats, F run) {
  run();  // warm-up: page tables, OpenMP pool start, caches
  std::vector<double> secs;
  secs.reserve(repeats);
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    const auto t1 = std::chrono::steady_clock::now();
    secs.push_back(std::chrono::duration<double>(t1 - t0).count());
  }
  std::nth_element(secs.begin(), secs.begin() + secs.size() / 2, secs.end());
  return secs[secs.size() / 2];
}

}  // namespace

ReduceBandwidth measure_reduce_bandwidth(int64_t bytes, int repeats) {
  ReduceBandwidth result;
  const int64_t n = bytes / static_cast<int64_t>(sizeof(float));
  if (n <= 0 || repeats < 1) return result;

  // Finite values of gradient-like magnitude, with some exact zeros; writing them also
  // faults every page in before any timing.
  std::vector<float> src(n);
  std::vector<float> dst(n, 1.0f);
  uint32_t state = 12345;
  for (int64_t i = 0; i < n; ++i) {
    state = state * 1664525u + 1013904223u;
    src[i] = (i % 61 == 0) ? 0.0f : (static_cast<float>(state >> 8) * 0x1p-24f - 0.5f) * 1e-2f;
  }

  std::vector<probe::ConstSpan> spans;
  int64_t offset = 0;
  for (const int64_t size : model_like_sizes(n)) {
    spans.push_back(probe::ConstSpan{src.data() + offset, size});
    offset += size;
  }

  probe::FusedReducer reducer;
  std::vector<probe::GradStats> stats;
  const double reduce_secs = median_seconds(repeats, [&] { reducer.grad_stats(spans, stats); });
  const double copy_secs = median_seconds(repeats, [&] {
    std::memcpy(dst.data(), src.data(), n * sizeof(float));
    // Reading the copy back keeps the compiler from treating the destination as dead.
    asm volatile("" : : "r"(dst.data()) : "memory");
  });

  const double counted_bytes = static_cast<double>(n) * sizeof(float);
  result.reduce_gbps = counted_bytes / reduce_secs / 1e9;
  result.memcpy_gbps = counted_bytes / copy_secs / 1e9;
  result.ratio = result.reduce_gbps / result.memcpy_gbps;
  return result;
}

}  // namespace keel::bench
