// keel app events: what the probe reported (first non-finite, spikes, skips, dumps) and what
// became of the user's commands (acknowledged, refused, timed out), newest first, merged by
// time, under the run's first non-finite (pinned). Repeats fold into one row ("skip x133,
// steps 38-170", EventRows); hovering a row shows its whole text. Clicking an event selects
// its layer (when it names one) and its step, so the heatmap, the layer detail and every
// plot's step cursor jump to it.
// Threads: the UI thread, inside an ImGui window; fills the space it is given.
#pragma once

#include <deque>

#include "model/run_model.hpp"
#include "ui/app_state.hpp"
#include "ui/control_state.hpp"

namespace keel::app::ui {

// `commands` newest first (ControlPanel::commands()).
void draw_events(const RunModel& run, AppState& state, const std::deque<CommandEntry>& commands);

// Index of the layer called `name` in `run`, or -1.
int find_layer(const RunModel& run, const std::string& name);

}  // namespace keel::app::ui
