// The fused CPU kernels on one small tensor held in cache: what a layer costs the probe beyond
// reaching its memory.
//
// What it is for: a deep narrow model's layers are 16 to 256 elements, and the probe measures
// most of them one kernel call at a time, inside backward (AccumulationStats) or in the pass.
// There the fixed cost of a call (folding its lanes) matters more than its bandwidth, which
// reduce_bandwidth measures. This is how the sum of squares' mis-vectorised lanes were found.
// Threads: call from one thread; no OpenMP region runs (the passes are below their threshold).
// Never: touches torch.
#pragma once

#include <cstdint>
#include <vector>

namespace keel::bench {

struct SmallTensorKernelCost {
  int64_t elements = 0;
  double grad_stats_ns = 0;   // grad_stats_of_chunk: a gradient's statistics, as the hooks take them
  double sumsq_ns = 0;        // sumsq_of_chunk: a weight's sum of squares, as the hooks take it
  double snapshot_ns = 0;     // FusedReducer::snapshot_sumsq of one tensor: copy and sum of squares
};

// Median over 5 timed runs of `calls` calls each, per size, on normally distributed floats.
std::vector<SmallTensorKernelCost> measure_small_tensor_kernels(const std::vector<int64_t>& sizes, int calls);

}  // namespace keel::bench
