// block_reduce: the fixed-order sum of one accumulator per thread over a thread block (warp
// shuffles, then one shared-memory step), shared by the CUDA probe's kernels. Each
// accumulator type that is reduced has a shuffle_down here (or beside its kernel, in this
// namespace, where argument-dependent lookup finds it). Compiled by nvcc only.
// Threads: every thread of the block calls it; the result is valid in thread 0.
#pragma once

#include <cuda_runtime.h>

#include "stats_math.hpp"
#include "step_verdict.hpp"
#include "update_math.hpp"

namespace keel::probe::cuda {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

__device__ __forceinline__ GradAccumulator shuffle_down(const GradAccumulator& a, int delta) {
  GradAccumulator b;
  b.sumsq = __shfl_down_sync(0xffffffffu, a.sumsq, delta);
  b.absmax_bits = __shfl_down_sync(0xffffffffu, static_cast<unsigned long long>(a.absmax_bits), delta);
  b.nonfinite = __shfl_down_sync(0xffffffffu, static_cast<unsigned long long>(a.nonfinite), delta);
  b.zeros = __shfl_down_sync(0xffffffffu, static_cast<unsigned long long>(a.zeros), delta);
  return b;
}

__device__ __forceinline__ UpdateAccumulator shuffle_down(const UpdateAccumulator& a, int delta) {
  UpdateAccumulator b;
  b.update_sumsq = __shfl_down_sync(0xffffffffu, a.update_sumsq, delta);
  b.old_sumsq = __shfl_down_sync(0xffffffffu, a.old_sumsq, delta);
  b.new_sumsq = __shfl_down_sync(0xffffffffu, a.new_sumsq, delta);
  return b;
}

__device__ __forceinline__ VerdictTotals shuffle_down(const VerdictTotals& a, int delta) {
  VerdictTotals b;
  b.sumsq = __shfl_down_sync(0xffffffffu, a.sumsq, delta);
  b.nonfinite = __shfl_down_sync(0xffffffffu, static_cast<unsigned long long>(a.nonfinite), delta);
  return b;
}

// The sum over the block, valid in thread 0.
template <class Accumulator>
__device__ Accumulator block_reduce(Accumulator acc) {
  __shared__ Accumulator warp_totals[kWarps];
  for (int delta = 16; delta > 0; delta /= 2) acc.merge(shuffle_down(acc, delta));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) warp_totals[warp] = acc;
  __syncthreads();
  if (warp == 0) {
    acc = lane < kWarps ? warp_totals[lane] : Accumulator{};
    for (int delta = kWarps / 2; delta > 0; delta /= 2) acc.merge(shuffle_down(acc, delta));
  }
  return acc;
}

}  // namespace keel::probe::cuda
