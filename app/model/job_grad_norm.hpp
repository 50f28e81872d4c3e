// JobGradNorm: a sharded job's grad norm, combined from its ranks' own.
//
// What it is for: under FSDP (or any sharding) each rank measures only its shards, so each
// rank's grad_norm is its part's, and none of them is the norm the job clips by or logs
// (torch's clip_grad_norm_ over the shards). The ranks' parts are disjoint, so the job's norm
// is sqrt(sum over ranks of grad_norm^2), exactly, with no collective in the trainer: the
// dashboard already hears every rank. Model gathers a step's ranks' norms from their runs'
// series once the last of them is stored (Model::ingest), whatever order the ranks' records
// came in (a late-attach backfill sends each rank's history whole, one rank after the other),
// and stores the sum here; a rank's NaN or Inf makes the job's value non-finite too.
// Memory: one SeriesHistory (its max_bytes).
// Threads: the model's owner thread, as Model.
// Never: throws.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "model/model_config.hpp"
#include "model/series_history.hpp"

namespace keel::app {

class JobGradNorm {
 public:
  explicit JobGradNorm(const ModelConfig& config) : config_(config) {}

  // The job of `world_size` ranks had, at `step`, these shard norms' squares summed to
  // `sumsq`. Another world_size than the last one's starts the series afresh (another job); so
  // does a step at or before the last one stored (the job was started again from a checkpoint).
  void store(int32_t world_size, int64_t step, double sumsq);

  // The job's grad norm by step; nullptr until a step of it was stored.
  const SeriesHistory* series() const { return series_ ? &*series_ : nullptr; }
  // The world_size of the job the series is of (0 before any).
  int32_t world_size() const { return world_size_; }
  size_t bytes_used() const { return sizeof(*this) + (series_ ? series_->bytes_used() : 0); }

 private:
  ModelConfig config_;
  int32_t world_size_ = 0;
  std::optional<SeriesHistory> series_;
};

}  // namespace keel::app
