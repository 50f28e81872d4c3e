// InstabilityFocus: takes the user to where a run went wrong, without a click.
//
// What it is for: at 3 AM the question is "which layer, when". On the run's first_nonfinite
// event (once per run and episode) it selects that layer and step, brings the step into view
// in every plot (a late attach opens on it, however far back it was) and asks the views to
// scroll the layer into view, so the heatmap labels it and the detail pane shows its history.
// On a spike, while nothing is selected, it selects the spike's step and the layer with the
// largest gradient norm there. Every frame it marks the first non-finite step on every plot.
// A selection the user makes afterwards stands: each event is attended to once.
// Threads: the UI thread. Never: touches ImGui or a socket.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "model/run_model.hpp"
#include "ui/app_state.hpp"

namespace keel::app::ui {

class InstabilityFocus {
 public:
  void update(const RunModel& run, AppState& state);

 private:
  const RunModel* run_ = nullptr;   // identity only: another run starts over
  std::optional<std::pair<int64_t, std::string>> attended_;   // first_nonfinite: step, layer
  bool seen_any_event_ = false;
  uint64_t newest_seen_seq_ = 0;
};

// The layer with the largest gradient norm at `step` (-1 when none has a sample there).
int loudest_layer_at(const RunModel& run, int64_t step);

// The layer whose gradient norm was loudest over steps [first_step, last_step]: the first (in
// model order) with a non-finite norm there, else the one with the largest norm; -1 when no
// layer has a sample there. What the detail pane shows before the user picks a layer.
int loudest_layer_over(const RunModel& run, int64_t first_step, int64_t last_step);

// Takes every view to `step`: selects it and `layer` (when the run has a layer of that name;
// otherwise the selected layer stays, as for a watched tensor or a run-wide event) and brings
// the step into view (AppState::reveal_step). An event clicked, the first non-finite, the F key.
void go_to(const RunModel& run, AppState& state, int64_t step, const std::string& layer);

}  // namespace keel::app::ui
