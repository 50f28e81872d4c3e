// keel app layer detail: the selected layer's metrics over the shared step range.
//
// What it is for: after the heatmap says "this layer", this says how: grad norm, absmax,
// param norm and update ratio (log y, stacked, same steps as every other plot), and the zero
// fraction (linear). Wheel zooms, drag pans, hover reads every plot out at the shared cursor.
// Threads: the UI thread, inside an ImGui window; fills the space it is given.
#pragma once

#include "model/run_model.hpp"
#include "ui/app_state.hpp"

namespace keel::app::ui {

void draw_layer_detail(const RunModel& run, AppState& state);

}  // namespace keel::app::ui
