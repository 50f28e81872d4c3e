// keel app layer detail: the selected layer's metrics over the shared step range.
//
// What it is for: after the heatmap says "this layer", this says how: a plot of each metric
// the wire table places in the detail pane (wire::kDetailPlotMetrics), in its order, three a
// row, on its style's scale (metric_styles.hpp: log y for norms and ratios, linear for a
// fraction), over the same steps as every other plot. Wheel zooms, drag pans, hover reads every plot out at the shared cursor.
// A layer without a gradient now says why (frozen or unused) beside its name. Before the user
// picks a layer, it shows the run in a line (steps held, loss, the first non-finite) and the
// layer loudest over the view (loudest_layer_over), so the pane is never empty.
// It also logs, once per change, which layer it shows and where ("keel: detail LAYER x0 ..."),
// so a test can read the pane's pixels.
// Threads: the UI thread, inside an ImGui window; fills the space it is given.
#pragma once

#include <string>

#include "model/run_model.hpp"
#include "ui/app_state.hpp"

namespace keel::app::ui {

class LayerDetail {
 public:
  void draw(const RunModel& run, AppState& state);

 private:
  void log_geometry(const std::string& layer);
  void draw_summary(const RunModel& run);

  std::string logged_geometry_;
};

}  // namespace keel::app::ui
