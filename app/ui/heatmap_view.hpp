// keel app layer heatmap: every layer (rows, model order) x the shared step range (columns).
//
// What it is for: seeing at a glance which layer moved first. Colour is log10 of the chosen
// metric (one of wire::kHeatmapMetrics, in the table's order) on the viridis map, scaled to what is
// visible; a cell holding a NaN or Inf anywhere in its steps has a colour of its own, as do
// steps whose update was skipped (a strip above the rows) and, for a gradient metric, the gaps
// of a layer that has no gradient now (frozen or unused; the reason on hover). A non-finite run of cells gets an
// outline of a readable size, and its row's name turns red. Rows are named in the gutter by
// priority (the selected one, those with a NaN in view or an event, those around the
// selection, then every few rows) where the names fit. A step axis runs under the rows, with
// the run's first non-finite step marked. Hover reads a cell out; a click selects its layer
// and step; the wheel and a drag zoom and pan like every step plot.
// Rows follow the layer tree's folds (AppState, ui/module_rows.hpp; a model of more than
// 1,000 tensors starts folded): a folded module is one row, its module's cells (RunModel), so a
// cell is the worst of its layers over the cell's steps (the largest value; the NaN/Inf colour
// when any layer is non-finite there: a NaN is never averaged away) and a non-finite layer
// turns its module's row and name red. Hovering a module's cell names its worst layer there;
// a click opens the module, here and in the layer list (its layers' own rows then show which
// is bad: selecting the worst would select a layer no row shows). Only the rows in view are
// queried: one series each where the model folds by default, whatever a module holds; in a
// smaller model a module folded by hand queries each of its layers (RunModel::module_summarize).
// It also logs, once per change, where its rows are on screen ("keel: heatmap x0 X x1 X y0 Y
// row PX layers N rows R folded F": R rows, F of them folded modules), so a test driving the
// real window with xdotool can click a given row.
// Threads: the UI thread, inside an ImGui window; fills the space it is given.
#pragma once

#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include <imgui.h>

#include "model/column_grid.hpp"
#include "model/run_model.hpp"
#include "model/value_summary.hpp"
#include "ui/app_state.hpp"
#include "ui/heatmap_image.hpp"
#include "ui/image_texture.hpp"
#include "ui/module_rows.hpp"
#include "ui/plot.hpp"

namespace keel::app::ui {

class HeatmapView {
 public:
  void draw(const RunModel& run, AppState& state);

 private:
  // Where this frame's rows go: below the skipped-steps strip, above the step axis.
  struct Layout {
    PlotFrame frame;         // the rows' area and the steps in view
    ImVec2 origin;           // the pane's top left, where the skipped-steps strip starts
    float row_px = 0;
    float axis_h = 0;        // the step axis under the rows
    int64_t first_step = 0, last_step = -1;
  };

  // The radio buttons choosing the heatmap's metric among wire::kHeatmapMetrics.
  static void draw_metric_choice(AppState& state);
  static Layout lay_out(size_t rows, const AppState& state);
  // Rows [r0, r1) of `tree_rows` over `grid`, of the heatmap's metric, into cells_; the skipped
  // steps into skipped_; the rows without a gradient into no_gradient_.
  void query_cells(const RunModel& run, const AppState& state, const std::vector<ModuleRow>& tree_rows,
                   const ColumnGrid& grid, size_t r0, size_t r1);
  // The abandoned spans' cells of rows [r0, r1) (layers only: a folded module's row has none)
  // into abandoned_cells_, for HeatmapImage::grey_abandoned(). Whether there are any.
  bool query_abandoned(const RunModel& run, const AppState& state, const std::vector<ModuleRow>& tree_rows,
                       const ColumnGrid& grid, size_t r0, size_t r1);
  void draw_skipped_strip(ImDrawList* draw, const Layout& layout, float column_px) const;
  // Rows [r0, r1) from `texture` (image_), each run of non-finite cells outlined; marks the
  // rows with one in nonfinite_rows_.
  void draw_rows(ImDrawList* draw, ImTextureID texture, const Layout& layout, size_t columns, size_t r0, size_t r1);
  // The read-out of the cell under the mouse, and a click's selection (a layer) or opening (a
  // folded module).
  void hover(const RunModel& run, AppState& state, const Layout& layout, const ColumnGrid& grid,
             const std::vector<ModuleRow>& tree_rows, size_t r0, size_t r1);
  void layer_tooltip(const RunModel& run, const AppState& state, size_t layer, const ColumnGrid& grid, int c,
                     int64_t step, const Summary& cell, bool no_gradient);
  void log_geometry(float x0, float y0, float x1, float row_px, size_t layers, const std::vector<ModuleRow>& rows);
  // The names of rows [r0, r1) in the gutter left of `rows_min`, most telling first;
  // `selected`: the row showing the selected layer (-1: none).
  void draw_row_labels(const RunModel& run, const std::vector<ModuleRow>& tree_rows, int selected, ImVec2 rows_min,
                       float row_px, size_t r0, size_t r1);
  // The hover read-out of a folded module's cell (column c of `grid`).
  void module_tooltip(const RunModel& run, const AppState& state, size_t module, const ColumnGrid& grid, int c,
                      const Summary& cell);

  ModuleRows rows_{false};
  // The cell whose worst layer was last found, and that layer (-1: none).
  struct WorstCell {
    const RunModel* run = nullptr;
    int64_t newest_step = -1;
    size_t module = 0;
    int64_t first_step = 0, last_step = -1;
    wire::LayerMetric metric = wire::LayerMetric::kGradNorm;
    bool operator!=(const WorstCell& o) const {
      return run != o.run || newest_step != o.newest_step || module != o.module || first_step != o.first_step ||
             last_step != o.last_step || metric != o.metric;
    }
  };
  WorstCell worst_cell_;
  int worst_layer_ = -1;

  std::vector<Summary> cells_;  // visible rows only, row-major

  std::vector<Summary> abandoned_cells_, abandoned_scratch_;   // query_abandoned()
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
