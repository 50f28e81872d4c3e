#include "model/job_layer_norms.hpp"

#include <algorithm>
#include <cmath>

#include "keel/wire/layer_metrics.hpp"

namespace keel::app {

void JobLayerNorms::store(int32_t world_size, int64_t step, const std::vector<double>& sumsq) {
  if (world_size != world_size_ || sumsq.size() != series_.size() || (!series_.empty() && step <= last_step())) {
    series_.clear();
  }
  world_size_ = world_size;
  if (series_.empty()) {
    const size_t per_series = config_.budget_share() / (std::max<size_t>(sumsq.size(), 1) * wire::kLayerMetricCount);
    const ModelConfig sized = SeriesHistory::config_within(config_, per_series);
    series_.reserve(sumsq.size());
    for (size_t l = 0; l < sumsq.size(); ++l) series_.emplace_back(step, sized);
  }
  for (size_t l = 0; l < sumsq.size(); ++l) {
    series_[l].append(step, static_cast<float>(std::sqrt(sumsq[l])));   // NaN and Inf carry through
  }
}

size_t JobLayerNorms::bytes_used() const {
  size_t bytes = sizeof(*this) + (series_.capacity() - series_.size()) * sizeof(SeriesHistory);
  for (const SeriesHistory& series : series_) bytes += series.bytes_used();
  return bytes;
}

}  // namespace keel::app
