#include "model/job_layer_values.hpp"

#include <algorithm>

namespace keel::app {

void JobLayerValues::store(int32_t world_size, int64_t step, size_t layers, const JobLayerStep& values) {
  if (world_size != world_size_ || layers != layers_ || (!series_.empty() && step <= last_step_)) {
    series_.clear();
    layers_ = 0;
  }
  world_size_ = world_size;
  if (series_.empty()) {
    const size_t per_series = config_.budget_share() / (std::max<size_t>(layers, 1) * wire::kLayerMetricCount);
    const ModelConfig sized = SeriesHistory::config_within(config_, per_series);
    series_.reserve(layers * kSlots);
    for (size_t k = 0; k < layers * kSlots; ++k) series_.emplace_back(step, sized);
    layers_ = layers;
  }
  last_step_ = step;
  for (size_t m = 0; m < static_cast<size_t>(wire::kLayerMetricCount); ++m) {
    const auto metric = static_cast<wire::LayerMetric>(m);
    if (!holds(metric) || (values.mask & wire::bit_of(metric)) == 0 || values.values[m].size() != layers) continue;
    SeriesHistory* series = &series_[slot_of(metric) * layers];
    for (size_t l = 0; l < layers; ++l) {
      if (l + kAppendPrefetchAhead < layers) series[l + kAppendPrefetchAhead].prefetch_append(step);
      series[l].append(step, values.values[m][l]);   // NaN and Inf carry through
    }
  }
}

size_t JobLayerValues::bytes_used() const {
  size_t bytes = sizeof(*this) + (series_.capacity() - series_.size()) * sizeof(SeriesHistory);
  for (const SeriesHistory& series : series_) bytes += series.bytes_used();
  return bytes;
}

}  // namespace keel::app
