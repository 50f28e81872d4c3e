// InstabilityFocus: takes the user to where a run went wrong, without a click.
//
// What it is for: at 3 AM the question is "which layer, when". On the run's first_nonfinite
// event (once per run and episode) it selects that layer and step and asks the views to
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

}  // namespace keel::app::ui
