// ChunkPlan: how the multi-tensor CUDA kernels split every tensor of a pass into chunks.
//
// What it is for: one kernel launch covers every layer on a device. Each thread block takes one
// chunk (a range of one tensor's elements) from a table in device memory, as PyTorch's
// multi_tensor_apply does, but with the table in device memory instead of kernel arguments, so
// one launch covers any number of tensors. A chunk's partial statistics are then folded per
// tensor in chunk order, so results repeat bit for bit from run to run.
// The plan depends only on the element counts: it is built when the probe plans its layers and
// uploaded once; the data pointers, which may change every step, travel in a separate table.
// Threads: any (plain values). Never: allocates after plan_chunks.
#pragma once

#include <cstdint>
#include <vector>

#include "stats_math.hpp"

namespace keel::probe::cuda {

// Elements per chunk: 64 Ki, PyTorch's multi_tensor_apply chunk, large enough that a block's
// fixed cost is small and small enough that a 163M-parameter model gives 2,500 blocks.
constexpr int64_t kChunkElements = 65536;

// One row of the chunk table (device memory). Layout shared with multi_tensor_stats.cu.
struct Chunk {
  int32_t tensor = 0;   // index into the tensor table
  int32_t unused = 0;
  int64_t begin = 0;    // element range [begin, end) of that tensor
  int64_t end = 0;
};

// Where each tensor's chunks are in the table: first and count (0 for an empty tensor).
struct TensorChunks {
  int32_t first = 0;
  int32_t count = 0;
};

struct ChunkPlan {
  std::vector<Chunk> chunks;
  std::vector<TensorChunks> tensors;
};

// Chunks of at most chunk_elements elements, tensor after tensor, in order.
ChunkPlan plan_chunks(const std::vector<int64_t>& numels, int64_t chunk_elements = kChunkElements);

// Folds a tensor's chunk partials in chunk order: the same fold the device runs per tensor.
template <class Accumulator>
KEEL_HD Accumulator fold_chunks(const Accumulator* partials, TensorChunks where) {
  Accumulator total;
  for (int32_t c = 0; c < where.count; ++c) total.merge(partials[where.first + c]);
  return total;
}

}  // namespace keel::probe::cuda
