// The multi-tensor passes' kernels (gradients; updates rebuilt from optimizer state); the
// contract is in multi_tensor_stats.hpp, the arithmetic in stats_math.hpp and update_math.hpp
// (shared with the CPU tests).
//
// Layout of the work: one thread block per chunk of the plan (64 Ki elements of one tensor).
// Its threads stride through the chunk, adjacent threads on adjacent elements so every load is
// coalesced; each keeps a GradAccumulator, and the block combines them with warp shuffles and
// one shared-memory step in a fixed order. A second launch, one thread per tensor, folds each
// tensor's chunk partials in chunk order. No atomics: the result repeats bit for bit. Both
// passes share this shape; only the per-element math and the accumulator differ.
#include <cuda_runtime.h>

#include "block_reduce.cuh"
#include "multi_tensor_stats.hpp"

namespace keel::probe::cuda {
namespace {

template <ElementType T>
__device__ GradAccumulator chunk_stats(const TensorRef& tensor, const Chunk& chunk, float inv_scale) {
  return grad_range<T>(static_cast<typename Element<T>::Storage*>(tensor.data), chunk.begin, chunk.end,
                       threadIdx.x, blockDim.x, inv_scale);
}

__global__ void __launch_bounds__(kThreads) grad_chunks_kernel(const TensorRef* tensors, const Chunk* chunks,
                                                               GradAccumulator* partials, float inv_scale) {
  const Chunk chunk = chunks[blockIdx.x];
  const TensorRef tensor = tensors[chunk.tensor];
  GradAccumulator acc;
  switch (tensor.type) {
    case ElementType::kFloat32: acc = chunk_stats<ElementType::kFloat32>(tensor, chunk, inv_scale); break;
    case ElementType::kFloat64: acc = chunk_stats<ElementType::kFloat64>(tensor, chunk, inv_scale); break;
    case ElementType::kBFloat16: acc = chunk_stats<ElementType::kBFloat16>(tensor, chunk, inv_scale); break;
    case ElementType::kFloat16: acc = chunk_stats<ElementType::kFloat16>(tensor, chunk, inv_scale); break;
  }
  acc = block_reduce(acc);
  if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

template <class Accumulator>
__global__ void fold_kernel(const TensorChunks* where, const Accumulator* partials, Accumulator* out,
                            int32_t tensor_count) {
  const int32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < tensor_count) out[t] = fold_chunks(partials, where[t]);
}

template <ElementType T>
__device__ UpdateAccumulator chunk_updates(const UpdateRef& tensor, const Chunk& chunk) {
  using Storage = typename Element<T>::Storage;
  return update_range<T>(static_cast<const Storage*>(tensor.weight), static_cast<const Storage*>(tensor.first),
                         static_cast<const Storage*>(tensor.second), tensor.coefficients, chunk.begin, chunk.end,
                         threadIdx.x, blockDim.x);
}

__global__ void __launch_bounds__(kThreads) update_chunks_kernel(const UpdateRef* tensors, const Chunk* chunks,
                                                                 UpdateAccumulator* partials) {
  const Chunk chunk = chunks[blockIdx.x];
  const UpdateRef tensor = tensors[chunk.tensor];
  UpdateAccumulator acc;
  switch (tensor.type) {
    case ElementType::kFloat32: acc = chunk_updates<ElementType::kFloat32>(tensor, chunk); break;
    case ElementType::kFloat64: acc = chunk_updates<ElementType::kFloat64>(tensor, chunk); break;
    case ElementType::kBFloat16: acc = chunk_updates<ElementType::kBFloat16>(tensor, chunk); break;
    case ElementType::kFloat16: acc = chunk_updates<ElementType::kFloat16>(tensor, chunk); break;
  }
  acc = block_reduce(acc);
  if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

template <class Accumulator>
int enqueue_fold(const TensorChunks* where, const Accumulator* partials, Accumulator* out, int32_t tensor_count,
                 cudaStream_t stream) {
  constexpr int kFoldThreads = 128;
  const int fold_blocks = (tensor_count + kFoldThreads - 1) / kFoldThreads;
  fold_kernel<<<fold_blocks, kFoldThreads, 0, stream>>>(where, partials, out, tensor_count);
  return cudaGetLastError();
}

__global__ void __launch_bounds__(kThreads) verdict_kernel(const GradAccumulator* per_tensor, int32_t count,
                                                           const float* loss, double max_sumsq, float* found_inf) {
  VerdictTotals totals;
  for (int32_t i = threadIdx.x; i < count; i += blockDim.x) totals.fold(per_tensor[i]);
  totals = block_reduce(totals);
  if (threadIdx.x == 0) {
    const uint32_t loss_bits = loss == nullptr ? 0u : float_bits(*loss);
    found_inf[0] = found_inf_value(totals.unsafe(loss_bits, max_sumsq));
    found_inf[1] = found_inf_value(totals.gradients_nonfinite());
  }
}

}  // namespace

int enqueue_step_verdict(const GradAccumulator* per_tensor, int32_t count, const float* loss, double max_sumsq,
                         float* found_inf, void* stream_handle) {
  verdict_kernel<<<1, kThreads, 0, static_cast<cudaStream_t>(stream_handle)>>>(per_tensor, count, loss, max_sumsq,
                                                                               found_inf);
  return cudaGetLastError();
}

int enqueue_grad_stats(const GradPass& pass, float inv_scale, void* stream_handle) {
  if (pass.tensor_count == 0) return cudaSuccess;
  const auto stream = static_cast<cudaStream_t>(stream_handle);
  if (pass.chunk_count > 0) {
    grad_chunks_kernel<<<pass.chunk_count, kThreads, 0, stream>>>(pass.tensors, pass.chunks, pass.partials, inv_scale);
    const cudaError_t launched = cudaGetLastError();
    if (launched != cudaSuccess) return launched;
  }
  return enqueue_fold(pass.where, pass.partials, pass.out, pass.tensor_count, stream);
}

int enqueue_update_stats(const UpdatePass& pass, void* stream_handle) {
  if (pass.tensor_count == 0) return cudaSuccess;
  const auto stream = static_cast<cudaStream_t>(stream_handle);
  if (pass.chunk_count > 0) {
    update_chunks_kernel<<<pass.chunk_count, kThreads, 0, stream>>>(pass.tensors, pass.chunks, pass.partials);
    const cudaError_t launched = cudaGetLastError();
    if (launched != cudaSuccess) return launched;
  }
  return enqueue_fold(pass.where, pass.partials, pass.out, pass.tensor_count, stream);
}

const char* cuda_error_text(int code) { return cudaGetErrorString(static_cast<cudaError_t>(code)); }

}  // namespace keel::probe::cuda
