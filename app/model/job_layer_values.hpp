// JobLayerValues: a sharded job's per-layer metrics, combined from its ranks' own.
//
// What it is for: under sharding each rank's layers are its parts of the parameters, so a
// rank's heatmap row shows half a layer, or none of it where the rank holds none (FSDP1's flat
// shards). Where the parameters are partitioned across the ranks (RunDescription::sharded) a
// layer's whole value is combined from its shards' exactly (combine_job_layers says how, metric
// by metric). Model stores a step here once every rank's current run holds that step's
// per-layer values (a step sent as module rollups has none: the job's layers have no value
// there), and the ranks strip shows the heatmap's metric as the job's row.
// Memory: one series per layer for each metric the strip can show (kMetrics, the heatmap's),
// each sized as a run's (the run's share of the budget over its layers and kLayerMetricCount):
// as much as a run's layers hold of those metrics, or the smallest series (442 bytes) per metric
// and layer where that is more (where layers times kLayerMetricCount passes about 230,000 at the
// default budget: 21 MB per metric held at 50,000 layers).
// Threads: the model's owner thread, as Model.
// Never: throws.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "keel/wire/layer_metrics.hpp"
#include "model/model_config.hpp"
#include "model/series_history.hpp"

namespace keel::app {

// One step's combined values: for each metric in `mask` (wire::bit_of), one per layer, indexed
// by the metric.
struct JobLayerStep {
  uint32_t mask = 0;
  std::array<std::vector<float>, wire::kLayerMetricCount> values;
};

class JobLayerValues {
 public:
  // The metrics combined and kept: the heatmap's (wire::kHeatmapMetrics), which the ranks strip shows.
  static constexpr uint32_t kMetrics = [] {
    uint32_t mask = 0;
    for (const wire::LayerMetric metric : wire::kHeatmapMetrics) mask |= wire::bit_of(metric);
    return mask;
  }();
  static constexpr bool holds(wire::LayerMetric metric) { return (kMetrics & wire::bit_of(metric)) != 0; }

  explicit JobLayerValues(const ModelConfig& config) : config_(config) {}

  // The job of `world_size` ranks had, at `step`, the metrics `values.mask` names as given;
  // every other metric has no value at that step. `layers` is each metric's length. Another
  // world_size or layer count than the last step's starts the series afresh (another job,
  // another model); so does a step at or before the last one stored.
  void store(int32_t world_size, int64_t step, size_t layers, const JobLayerStep& values);

  // Layers stored (0 before any step), the job's world_size, and a layer's series of a metric
  // it holds().
  size_t layer_count() const { return layers_; }
  int32_t world_size() const { return world_size_; }
  const SeriesHistory& layer(wire::LayerMetric metric, size_t index) const {
    return series_[slot_of(metric) * layers_ + index];
  }
  // The last step stored (meaningless while layer_count() is 0).
  int64_t last_step() const { return last_step_; }
  // The first step a series of this job can hold (meaningless while layer_count() is 0).
  int64_t origin_step() const { return series_.empty() ? 0 : series_.front().origin_step(); }
  size_t bytes_used() const;

 private:
  static constexpr int kSlots = __builtin_popcount(kMetrics);
  // Where a held metric's series start, in units of layers_.
  static constexpr size_t slot_of(wire::LayerMetric metric) {
    return static_cast<size_t>(__builtin_popcount(kMetrics & (wire::bit_of(metric) - 1)));
  }

  ModelConfig config_;
  int32_t world_size_ = 0;
  size_t layers_ = 0;
  int64_t last_step_ = -1;
  std::vector<SeriesHistory> series_;   // metric-major: [slot_of(metric) * layers_ + layer]
};

}  // namespace keel::app
