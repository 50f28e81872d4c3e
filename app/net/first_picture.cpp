#include "net/first_picture.hpp"

#include <algorithm>
#include <limits>

namespace keel::app {

namespace {

// `count` of `candidates` (ascending), spread evenly over them.
std::vector<size_t> spread(const std::vector<size_t>& candidates, size_t count) {
  if (count >= candidates.size()) return candidates;
  std::vector<size_t> out;
  if (count == 0) return out;
  out.reserve(count);
  for (size_t k = 0; k < count; ++k) out.push_back(candidates[k * candidates.size() / count]);
  return out;
}

}  // namespace

FirstPicturePlan plan_first_picture(const std::vector<wire::RecordingChunk>& chunks,
                                    const FirstPictureBudget& budget) {
  FirstPicturePlan plan;
  uint64_t raw = 0;
  int64_t first = std::numeric_limits<int64_t>::max();
  int64_t last = std::numeric_limits<int64_t>::min();
  for (const wire::RecordingChunk& chunk : chunks) {
    raw += chunk.raw_bytes;
    if (chunk.messages == 0) continue;
    first = std::min(first, chunk.first_step);
    last = std::max(last, chunk.last_step);
  }
  const size_t max_chunks = std::max<size_t>(budget.max_chunks, 2);
  if (raw <= budget.whole_raw_bytes || first > last) {
    plan.whole = true;
    for (size_t i = 0; i < chunks.size(); ++i) plan.chunks.push_back(i);
    return plan;
  }
  plan.first_step = first;
  const int64_t span = last - first + 1;
  const int64_t samples = std::max<int64_t>(budget.samples, 1);
  plan.stride = std::max<int64_t>(1, (span + samples - 1) / samples);

  // The ends always; the chunks with descriptions or events next, spread evenly if even they
  // are more than the budget; the rest of the budget spread evenly over the other chunks.
  std::vector<size_t> flagged;
  std::vector<size_t> plain;
  for (size_t i = 1; i + 1 < chunks.size(); ++i) {
    ((chunks[i].flags & wire::recording::kChunkHasDescriptionOrEvent) ? flagged : plain).push_back(i);
  }
  plan.chunks = {0, chunks.size() - 1};
  const std::vector<size_t> flagged_kept = spread(flagged, max_chunks - 2);
  plan.chunks.insert(plan.chunks.end(), flagged_kept.begin(), flagged_kept.end());
  const std::vector<size_t> plain_kept = spread(plain, max_chunks - plan.chunks.size());
  plan.chunks.insert(plan.chunks.end(), plain_kept.begin(), plain_kept.end());
  std::sort(plan.chunks.begin(), plan.chunks.end());
  plan.chunks.erase(std::unique(plan.chunks.begin(), plan.chunks.end()), plan.chunks.end());
  return plan;
}

bool StepSampler::take(int64_t step) {
  if (step < next_) return false;
  // The next sample point after this step: first_ + k * stride_ > step.
  const int64_t k = step < first_ ? 0 : (step - first_) / stride_ + 1;
  next_ = first_ + k * stride_;
  return true;
}

}  // namespace keel::app
