// RunModel after a rewind: telling a rewind's continuation from a replay, and keeping the
// steps it left behind as an abandoned span (run_model.hpp, abandoned_span.hpp).
#include <algorithm>

#include "model/run_model.hpp"

namespace keel::app {

bool RunModel::starts_continuation(const wire::StepRecord& record) {
  // Only a record in order: a replay (lower seq) goes back too, and is history.
  if (rewind_from_step_ < 0 || !last_in_order_ || !has_steps()) return false;
  if (record.step > latest_.step) {
    // The step the rewind interrupted may come after its event; a step past it means the
    // continuation never came (the rewind failed after its event): forget the event.
    if (record.step > rewind_from_step_) rewind_from_step_ = -1;
    return false;
  }
  rewind_from_step_ = -1;
  // Before the first stored step no series can take it (a client that attached after the
  // snapshot's step): counted as duplicates, as before rewinds existed.
  return record.step >= first_step_;
}

void RunModel::abandon_from(int64_t step) {
  AbandonedSpan span = make_span(step, latest_.step);
  const int64_t keep_to = step - 1;
  for (auto& per_metric : layer_series_) {
    for (SeriesHistory& series : per_metric) series.drop_after(keep_to);
  }
  for (auto& per_metric : module_series_) {
    for (SeriesHistory& series : per_metric) series.drop_after(keep_to);
  }
  for (SeriesHistory& series : global_series_) series.drop_after(keep_to);
  for (SeriesHistory& series : watch_series_) series.drop_after(keep_to);
  abandoned_.push_back(std::move(span));
  while (abandoned_.size() > kMaxAbandonedSpans) {
    abandoned_.pop_front();
    ++counters_.spans_evicted;
  }
  latest_.step = keep_to;
  last_layer_values_step_ = std::min(last_layer_values_step_, keep_to);
  // The rate is measured over steps that went back: it starts again from the continuation.
  stamps_.clear();
  ++counters_.rewinds;
}

AbandonedSpan RunModel::make_span(int64_t first_step, int64_t last_step) const {
  // Every span gets an equal part of the run's abandoned share, so kMaxAbandonedSpans of them
  // fit it whatever their lengths.
  const size_t bytes = config_.abandoned_share() / kMaxAbandonedSpans;
  const int64_t steps = last_step - first_step + 1;
  const size_t layers = layer_series_[0].size();
  const size_t all_series = global_series_.size() + layers * wire::kLayerMetricCount;
  const ModelConfig with_layers = abandoned_series_config(steps, all_series, bytes);
  const bool keep_layers = abandoned_series_fit(with_layers, all_series, bytes);
  const ModelConfig config = keep_layers ? with_layers : abandoned_series_config(steps, global_series_.size(), bytes);
  AbandonedSpan span;
  span.first_step = first_step;
  span.last_step = last_step;
  span.global.reserve(global_series_.size());
  for (const SeriesHistory& series : global_series_) {
    span.global.push_back(abandoned_copy(series, first_step, last_step, config));
  }
  if (!keep_layers) return span;
  for (int m = 0; m < wire::kLayerMetricCount; ++m) {
    span.layers[m].reserve(layer_series_[m].size());
    for (const SeriesHistory& series : layer_series_[m]) {
      span.layers[m].push_back(abandoned_copy(series, first_step, last_step, config));
    }
  }
  return span;
}

const SeriesHistory* RunModel::abandoned_global(size_t span, GlobalSeries series) const {
  const auto index = static_cast<size_t>(series);
  if (span >= abandoned_.size() || index >= abandoned_[span].global.size()) return nullptr;
  return &abandoned_[span].global[index];
}

const SeriesHistory* RunModel::abandoned_layer(size_t span, size_t layer, wire::LayerMetric metric) const {
  const auto m = static_cast<size_t>(metric);
  if (span >= abandoned_.size() || m >= abandoned_[span].layers.size()) return nullptr;
  const std::vector<SeriesHistory>& layers = abandoned_[span].layers[m];
  return layer < layers.size() ? &layers[layer] : nullptr;
}

int64_t RunModel::last_shown_step() const {
  int64_t last = latest_.step;
  for (const AbandonedSpan& span : abandoned_) last = std::max(last, span.last_step);
  return last;
}

}  // namespace keel::app
