// keel app events: what the probe reported (first non-finite, spikes, skips, dumps), newest
// first. Clicking an event selects its layer (when it names one) and its step, so the heatmap,
// the layer detail and every plot's step cursor jump to it.
// Threads: the UI thread, inside an ImGui window; fills the space it is given.
#pragma once

#include "model/run_model.hpp"
#include "ui/app_state.hpp"

namespace keel::app::ui {

void draw_events(const RunModel& run, AppState& state);

// Index of the layer called `name` in `run`, or -1.
int find_layer(const RunModel& run, const std::string& name);

}  // namespace keel::app::ui
