// keel app events: what the probe reported (first non-finite, spikes, skips, dumps) and what
// became of the user's commands (acknowledged, refused, timed out), newest first, merged by
// time, under the run's first non-finite (pinned). Repeats fold into one row ("skip x133,
// steps 38-170", EventRows); the detail column wraps, so a dump's path reads whole, with a
// button that copies it; hovering a row shows its whole text. Clicking an event selects its
// layer (when it names one) and its step and brings the step into view in every plot (go_to).
// When that step is older than the history kept, a notice under the rows says so and where
// its history is (the run's recording, the dump of that step).
// Threads: the UI thread, inside an ImGui window; fills the space it is given.
#pragma once

#include <cstdint>
#include <deque>
#include <string>

#include "model/run_model.hpp"
#include "ui/app_state.hpp"
#include "ui/control_state.hpp"

namespace keel::app::ui {

// `commands` newest first (ControlPanel::commands()).
void draw_events(const RunModel& run, AppState& state, const std::deque<CommandEntry>& commands);

// Index of the layer called `name` in `run`, or -1.
int find_layer(const RunModel& run, const std::string& name);

// What the events pane says when `step` is older than `first_kept`, the run's first step held:
// where the rest of the run is (the run's recording, and `dump` when one was written then).
std::string before_history_notice(int64_t step, int64_t first_kept, const std::string& dump);

// A small button that puts `text` on the clipboard ("keel: copied TEXT" with --verbose, read
// back from the clipboard).
void copy_button(const char* label, const std::string& text);

}  // namespace keel::app::ui
