// JobLayerNorms: a sharded job's grad norm per layer, combined from its ranks' own.
//
// What it is for: under sharding each rank's layers are its parts of the parameters, so a
// rank's heatmap row shows half a layer, or none of it where the rank holds none (FSDP1's flat
// shards). Where the parameters are partitioned across the ranks (RunDescription::sharded) a
// layer's whole gradient norm is sqrt(sum over ranks of its grad_norm^2), exactly, as
// JobGradNorm forms the job's. Model stores a step here once every rank's current run holds
// that step's per-layer values (a step sent as module rollups has none: the job's layers have
// no value there), and the ranks strip shows it as the job's row.
// Memory: one series per layer, each sized as one metric of a run's layers (a run's share of
// the budget over its layers and kLayerMetricCount): a sixth of one run's share, or the
// smallest series (442 bytes) per layer where that is less (past about 38,000 layers at the
// default budget).
// Threads: the model's owner thread, as Model.
// Never: throws.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/model_config.hpp"
#include "model/series_history.hpp"

namespace keel::app {

class JobLayerNorms {
 public:
  explicit JobLayerNorms(const ModelConfig& config) : config_(config) {}

  // The job of `world_size` ranks had, at `step`, each layer's shard norms' squares summed to
  // `sumsq[layer]`. Another world_size or layer count than the last step's starts the series
  // afresh (another job, another model); so does a step at or before the last one stored.
  void store(int32_t world_size, int64_t step, const std::vector<double>& sumsq);

  // Layers stored (0 before any step), the job's world_size, and each layer's series.
  size_t layer_count() const { return series_.size(); }
  int32_t world_size() const { return world_size_; }
  const SeriesHistory& layer(size_t index) const { return series_[index]; }
  // The last step stored (meaningless while layer_count() is 0).
  int64_t last_step() const { return series_.empty() ? -1 : series_.front().last_step(); }
  size_t bytes_used() const;

 private:
  ModelConfig config_;
  int32_t world_size_ = 0;
  std::vector<SeriesHistory> series_;
};

}  // namespace keel::app
