#include "ui/abandoned_series.hpp"

namespace keel::app::ui {

std::vector<const SeriesHistory*> abandoned_global_series(const RunModel& run, GlobalSeries series) {
  std::vector<const SeriesHistory*> out;
  for (size_t span = run.abandoned_spans().size(); span-- > 0;) {
    if (const SeriesHistory* history = run.abandoned_global(span, series)) out.push_back(history);
  }
  return out;
}

std::vector<const SeriesHistory*> abandoned_layer_series(const RunModel& run, size_t layer, wire::LayerMetric metric) {
  std::vector<const SeriesHistory*> out;
  for (size_t span = run.abandoned_spans().size(); span-- > 0;) {
    if (const SeriesHistory* history = run.abandoned_layer(span, layer, metric)) out.push_back(history);
  }
  return out;
}

void summarize_abandoned(const std::vector<const SeriesHistory*>& spans, const ColumnGrid& grid, Summary* out,
                         std::vector<Summary>& scratch) {
  const auto columns = static_cast<size_t>(grid.columns());
  for (size_t c = 0; c < columns; ++c) out[c] = Summary{};
  scratch.resize(columns);
  for (const SeriesHistory* span : spans) {
    span->summarize(grid, scratch.data());
    for (size_t c = 0; c < columns; ++c) {
      if (!out[c].has_data()) out[c] = scratch[c];
    }
  }
}

}  // namespace keel::app::ui
