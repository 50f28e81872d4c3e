#include "ui/instability_focus.hpp"

#include <cmath>
#include <vector>

#include "keel/wire/vocabulary.hpp"
#include "model/column_grid.hpp"
#include "model/value_summary.hpp"
#include "ui/events_view.hpp"

namespace keel::app::ui {

int loudest_layer_at(const RunModel& run, int64_t step) {
  int loudest = -1;
  float loudest_norm = 0;
  for (size_t i = 0; i < run.layer_count(); ++i) {
    float norm = 0;
    if (!run.layer_series(i, wire::LayerMetric::kGradNorm).value_at(step, &norm)) continue;
    // A non-finite norm is the loudest of all.
    if (!std::isfinite(norm)) return int(i);
    if (loudest < 0 || norm > loudest_norm) {
      loudest = int(i);
      loudest_norm = norm;
    }
  }
  return loudest;
}

int loudest_layer_over(const RunModel& run, int64_t first_step, int64_t last_step) {
  std::vector<Summary> cells;
  // One column over the range: the exact min and max of each layer there.
  run.heatmap(wire::LayerMetric::kGradNorm, 0, run.layer_count(), ColumnGrid(first_step, last_step, 1), cells);
  int loudest = -1;
  for (size_t i = 0; i < cells.size(); ++i) {
    if (cells[i].has_nonfinite()) return int(i);
    if (cells[i].has_finite() && (loudest < 0 || cells[i].max > cells[size_t(loudest)].max)) loudest = int(i);
  }
  return loudest;
}

void go_to(const RunModel& run, AppState& state, int64_t step, const std::string& layer) {
  const int index = find_layer(run, layer);
  if (index >= 0) {
    state.select(index, layer, step);
  } else {
    state.select(state.selected_layer(), state.selected_layer_name(), step);
  }
  state.reveal_step(step);
}

void InstabilityFocus::update(const RunModel& run, AppState& state) {
  if (&run != run_) {
    run_ = &run;
    attended_.reset();
    seen_any_event_ = false;
    newest_seen_seq_ = 0;
  }
  const std::optional<wire::Event>& first = run.first_nonfinite();
  state.set_marked_step(first ? first->step : -1);
  if (first && (!attended_ || attended_->first != first->step || attended_->second != first->layer)) {
    attended_ = std::make_pair(first->step, first->layer);
    // A non-finite loss names no layer: go to the step, keep the layer.
    go_to(run, state, first->step, first->layer);
    if (find_layer(run, first->layer) >= 0) state.request_scroll_to_selection();
  }
  // Spikes since the last frame, newest first; only while the user has selected nothing.
  const auto& events = run.events();
  for (const wire::Event& event : events) {
    if (seen_any_event_ && event.seq <= newest_seen_seq_) break;
    if (event.kind != wire::event_kind::kSpike || state.selected_layer() >= 0) continue;
    const int layer = loudest_layer_at(run, event.step);
    if (layer < 0) continue;
    state.select(layer, run.layer_name(size_t(layer)), event.step);
    state.request_scroll_to_selection();
  }
  if (!events.empty()) {
    seen_any_event_ = true;
    newest_seen_seq_ = events.front().seq;
  }
}

}  // namespace keel::app::ui
