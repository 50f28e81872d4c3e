#include "ui/instability_focus.hpp"

#include <cmath>

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
    const int layer = find_layer(run, first->layer);
    if (layer >= 0) {
      state.select(layer, first->layer, first->step);
      state.request_scroll_to_selection();
    } else {
      // A non-finite loss names no layer: go to the step, keep the layer.
      state.select(state.selected_layer(), state.selected_layer_name(), first->step);
    }
  }
  // Spikes since the last frame, newest first; only while the user has selected nothing.
  const auto& events = run.events();
  for (const wire::Event& event : events) {
    if (seen_any_event_ && event.seq <= newest_seen_seq_) break;
    if (event.kind != "spike" || state.selected_layer() >= 0) continue;
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
