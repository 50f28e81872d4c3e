#include "chunk_plan.hpp"

#include <stdexcept>

namespace keel::probe::cuda {

ChunkPlan plan_chunks(const std::vector<int64_t>& numels, int64_t chunk_elements) {
  if (chunk_elements <= 0) throw std::invalid_argument("plan_chunks: chunk_elements must be positive");
  ChunkPlan plan;
  plan.tensors.reserve(numels.size());
  for (size_t t = 0; t < numels.size(); ++t) {
    TensorChunks where;
    where.first = static_cast<int32_t>(plan.chunks.size());
    for (int64_t begin = 0; begin < numels[t]; begin += chunk_elements) {
      Chunk chunk;
      chunk.tensor = static_cast<int32_t>(t);
      chunk.begin = begin;
      chunk.end = begin + chunk_elements < numels[t] ? begin + chunk_elements : numels[t];
      plan.chunks.push_back(chunk);
    }
    where.count = static_cast<int32_t>(plan.chunks.size()) - where.first;
    plan.tensors.push_back(where);
  }
  return plan;
}

}  // namespace keel::probe::cuda
