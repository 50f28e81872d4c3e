// keel app global charts: the run's scalars over the shared step range.
//
// What it is for: the first place a blow-up shows: loss, global gradient norm (log y), loss
// scale (log y, with skipped updates marked in every chart) and the magnitudes of the first
// watched tensor (logits: absmax and z, the mean logsumexp that z-loss penalises).
// Threads: the UI thread, inside an ImGui window; fills the space it is given.
#pragma once

#include "model/run_model.hpp"
#include "ui/app_state.hpp"

namespace keel::app::ui {

void draw_global_charts(const RunModel& run, AppState& state);

}  // namespace keel::app::ui
