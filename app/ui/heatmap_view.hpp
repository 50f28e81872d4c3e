// keel app layer heatmap: every layer (rows, model order) x the shared step range (columns).
//
// What it is for: seeing at a glance which layer moved first. Colour is log10 of the chosen
// metric (grad norm, update ratio, absmax, zero fraction) on the viridis map, scaled to what is
// visible; a cell holding a NaN or Inf anywhere in its steps has a colour of its own, as do
// steps whose update was skipped (a strip above the rows). Hover reads a cell out; a click
// selects its layer and step; the wheel and a drag zoom and pan like every step plot.
// It also logs, once per change, where its rows are on screen ("keel: heatmap ..."), so a test
// driving the real window with xdotool can click a given layer.
// Threads: the UI thread, inside an ImGui window; fills the space it is given.
#pragma once

#include <memory>
#include <string>
#include <vector>

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

  std::vector<Summary> cells_;  // visible rows only, row-major
  HeatmapImage image_;           // cells_ coloured, one texel each
  std::unique_ptr<ImageTexture> texture_;
  std::vector<Summary> skipped_;
  std::string logged_geometry_;
};

}  // namespace keel::app::ui
