// The watched tensor's kernels; the contract is in watch_stats.hpp, the arithmetic in
// watch_math.hpp (shared with the CPU tests).
#include "watch_stats.hpp"

#include <cuda_runtime.h>

#include "block_reduce.cuh"

namespace keel::probe::cuda {

__device__ __forceinline__ RowLogSumExp shuffle_down(const RowLogSumExp& a, int delta) {
  RowLogSumExp b;
  b.max = __shfl_down_sync(0xffffffffu, a.max, delta);
  b.sum = __shfl_down_sync(0xffffffffu, a.sum, delta);
  b.nan = __shfl_down_sync(0xffffffffu, a.nan, delta);
  b.pos_inf = __shfl_down_sync(0xffffffffu, a.pos_inf, delta);
  return b;
}

__device__ __forceinline__ RowStats shuffle_down(const RowStats& a, int delta) {
  RowStats b;
  b.values = shuffle_down(a.values, delta);
  b.lse = shuffle_down(a.lse, delta);
  return b;
}

__device__ __forceinline__ WatchTotals shuffle_down(const WatchTotals& a, int delta) {
  WatchTotals b;
  b.values = shuffle_down(a.values, delta);
  b.lse_sum = __shfl_down_sync(0xffffffffu, a.lse_sum, delta);
  b.rows = __shfl_down_sync(0xffffffffu, static_cast<unsigned long long>(a.rows), delta);
  return b;
}

namespace {

template <ElementType T>
__device__ RowStats row_stats(const void* data, int64_t row, int64_t cols) {
  const auto* p = static_cast<const typename Element<T>::Storage*>(data);
  return row_range<T>(p, row * cols, row * cols + cols, threadIdx.x, blockDim.x);
}

__global__ void __launch_bounds__(kThreads) watch_rows_kernel(const void* data, ElementType type, int64_t cols,
                                                             RowStats* row_out) {
  const int64_t row = blockIdx.x;
  RowStats acc;
  switch (type) {
    case ElementType::kFloat32: acc = row_stats<ElementType::kFloat32>(data, row, cols); break;
    case ElementType::kFloat64: acc = row_stats<ElementType::kFloat64>(data, row, cols); break;
    case ElementType::kBFloat16: acc = row_stats<ElementType::kBFloat16>(data, row, cols); break;
    case ElementType::kFloat16: acc = row_stats<ElementType::kFloat16>(data, row, cols); break;
  }
  acc = block_reduce(acc);
  if (threadIdx.x == 0) row_out[row] = acc;
}

__global__ void __launch_bounds__(kThreads) watch_fold_kernel(const RowStats* rows, int64_t count, WatchTotals* out) {
  WatchTotals acc;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) acc.fold(rows[i]);
  acc = block_reduce(acc);
  if (threadIdx.x == 0) out[0] = acc;
}

}  // namespace

int enqueue_watch_stats(const WatchPass& pass, void* stream_handle) {
  const auto stream = static_cast<cudaStream_t>(stream_handle);
  if (pass.rows > 0x7fffffffLL) return cudaErrorInvalidValue;
  if (pass.rows > 0) {
    watch_rows_kernel<<<static_cast<unsigned>(pass.rows), kThreads, 0, stream>>>(pass.data, pass.type, pass.cols,
                                                                               pass.row_out);
    const cudaError_t launched = cudaGetLastError();
    if (launched != cudaSuccess) return launched;
  }
  watch_fold_kernel<<<1, kThreads, 0, stream>>>(pass.row_out, pass.rows, pass.out);
  return cudaGetLastError();
}

}  // namespace keel::probe::cuda
