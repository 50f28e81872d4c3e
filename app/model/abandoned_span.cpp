// AbandonedSpan: sizing and filling the series a rewind leaves behind.
#include "model/abandoned_span.hpp"

#include <algorithm>

namespace keel::app {

size_t AbandonedSpan::bytes_used() const {
  size_t bytes = sizeof(AbandonedSpan);
  for (const SeriesHistory& series : global) bytes += series.bytes_used();
  for (const auto& per_metric : layers) {
    for (const SeriesHistory& series : per_metric) bytes += series.bytes_used();
  }
  return bytes;
}

ModelConfig abandoned_series_config(int64_t steps, size_t series, size_t bytes) {
  ModelConfig config;
  // The recent window is what copying costs nothing to query; the pyramid holds the span,
  // one step a bucket while it is at most 2048 steps long.
  config.recent_steps = 16;
  config.archive_buckets = std::clamp<int64_t>(steps, 8, 2048);
  return SeriesHistory::config_within(config, bytes / std::max<size_t>(series, 1));
}

bool abandoned_series_fit(const ModelConfig& config, size_t series, size_t bytes) {
  return SeriesHistory::max_bytes(config) * series <= bytes;
}

SeriesHistory abandoned_copy(const SeriesHistory& live, int64_t first_step, int64_t last_step,
                             const ModelConfig& config) {
  SeriesHistory copy(first_step, config);
  const int64_t last = std::min(last_step, live.last_step());
  float value = 0;
  for (int64_t step = std::max(first_step, live.recent_first_step()); step <= last; ++step) {
    if (live.value_at(step, &value)) copy.append(step, value);
  }
  return copy;
}

}  // namespace keel::app
