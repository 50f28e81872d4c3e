// keel app layer heatmap: every layer (rows, model order) x the shared step range (columns).
//
// What it is for: seeing at a glance which layer moved first. Colour is log10 of the chosen
// metric (grad norm, update ratio, absmax, zero fraction) on the viridis map, scaled to what is
// visible; a cell holding a NaN or Inf anywhere in its steps has a colour of its own, as do
// steps whose update was skipped (a strip above the rows) and, for a gradient metric, the gaps
// of a layer that has no gradient now (frozen or unused; the reason on hover). A non-finite run of cells gets an
// outline of a readable size, and its row's name turns red. Rows are named in the gutter by
// priority (the selected one, those with a NaN in view or an event, those around the
// selection, then every few rows) where the names fit. A step axis runs under the rows, with
// the run's first non-finite step marked. Hover reads a cell out; a click selects its layer
// and step; the wheel and a drag zoom and pan like every step plot.
// It also logs, once per change, where its rows are on screen ("keel: heatmap ..."), so a test
// driving the real window with xdotool can click a given layer.
// Threads: the UI thread, inside an ImGui window; fills the space it is given.
#pragma once

#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include <imgui.h>

#include "model/run_model.hpp"
#include "model/value_summary.hpp"
#include "ui/app_state.hpp"
#include "ui/heatmap_image.hpp"
#include "ui/image_texture.hpp"

namespace keel::app::ui {

class HeatmapView {
 public:
  void draw(const RunModel& run, AppState& state);

 private:
  void log_geometry(float x0, float y0, float x1, float row_px, size_t rows);
  // The names of rows [r0, r1) in the gutter left of `rows_min`, most telling first.
  void draw_row_labels(const RunModel& run, const AppState& state, ImVec2 rows_min, float row_px, size_t r0, size_t r1);

  std::vector<Summary> cells_;  // visible rows only, row-major
  HeatmapImage image_;           // cells_ coloured, one texel each
  std::unique_ptr<ImageTexture> texture_;
  std::vector<Summary> skipped_;
  std::string logged_geometry_;
  // Per frame, kept to spare allocations: per visible row, whether it has a non-finite cell
  // in view, whether an event names its layer and whether its layer has no gradient; the
  // label candidates; the labels placed.
  std::vector<bool> nonfinite_rows_;
  NoGradientCells no_gradient_;
  std::vector<bool> named_rows_;
  std::unordered_set<std::string> event_layers_;
  std::vector<size_t> label_order_;
  std::vector<float> placed_;
};

}  // namespace keel::app::ui
