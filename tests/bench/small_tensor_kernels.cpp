// Measurement behind measure_small_tensor_kernels; see small_tensor_kernels.hpp.
#include "small_tensor_kernels.hpp"

#include <algorithm>
#include <chrono>
#include <random>

#include "keel/probe/fused_reduce.hpp"

namespace keel::bench {
namespace {

template <typename Call>
double median_ns_per_call(int calls, Call call) {
  std::vector<double> runs;
  for (int run = 0; run < 5; ++run) {
    const auto start = std::chrono::steady_clock::now();
    for (int c = 0; c < calls; ++c) {
      call();
      asm volatile("" ::: "memory");   // each call reads the buffers again
    }
    runs.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() / calls);
  }
  std::sort(runs.begin(), runs.end());
  return runs[runs.size() / 2];
}

}  // namespace

std::vector<SmallTensorKernelCost> measure_small_tensor_kernels(const std::vector<int64_t>& sizes, int calls) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<SmallTensorKernelCost> rows;
  for (const int64_t n : sizes) {
    std::vector<float> values(static_cast<size_t>(n)), copy(static_cast<size_t>(n));
    for (float& v : values) v = normal(rng);
    probe::FusedReducer reducer;
    std::vector<double> out;
    const std::vector<probe::SnapshotSpan> spans{{values.data(), copy.data(), n}};
    volatile double sink = 0;
    SmallTensorKernelCost row;
    row.elements = n;
    row.grad_stats_ns = median_ns_per_call(calls, [&] { sink = sink + probe::grad_stats_of_chunk(values.data(), n).sumsq; });
    row.sumsq_ns = median_ns_per_call(calls, [&] { sink = sink + probe::sumsq_of_chunk(values.data(), n); });
    row.snapshot_ns = median_ns_per_call(calls, [&] { reducer.snapshot_sumsq(spans, out); });
    rows.push_back(row);
  }
  return rows;
}

}  // namespace keel::bench
