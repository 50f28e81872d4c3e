// keel app plot helper: step-indexed time series drawn on an ImDrawList.
//
// What it is for: ImPlot is not packaged for Debian, and it does not thin data anyway. Every
// series reaches a plot already reduced by the model to at most one (min, max) pair per pixel
// column; this helper maps steps and values to pixels, draws axes with readable ticks (log10
// ticks as powers of ten), draws min/max columns as one continuous trace, keeps non-finite
// columns visible as marks of their own, and turns the mouse (wheel zoom, drag pan, hover)
// into changes of the shared AppState.
// Threads: the UI thread, inside an ImGui frame.
// Never: averages a non-finite value away or allocates per point (columns are per pixel).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <imgui.h>

#include "model/column_grid.hpp"
#include "model/series_history.hpp"
#include "model/value_summary.hpp"

namespace keel::app::ui {

class AppState;

struct PlotFrame {
  ImVec2 min, max;         // plot area (inside the axes) in screen pixels
  double x_first = 0, x_last = 1;  // steps at the left and right edges
  double y_low = 0, y_high = 1;    // value range; log10 of it when log_y
  bool log_y = false;
  bool hovered = false;    // mouse over the plot area this frame
  bool active = false;     // left button held on the plot (dragging)

  float x_px(double step) const;
  double step_at(float px) const;
  // y of a value (raw, not log10); values <= 0 on a log axis land on the bottom edge.
  float y_px(double value) const;
};

// Reserves `size` (the whole plot including axis labels) at the cursor as one ImGui item
// (`title` is its id) and returns the frame of the drawing area; its width in pixels is the
// column count to ask the model for.
PlotFrame begin_plot(const char* title, ImVec2 size, double x_first, double x_last, bool log_y);
// Fits the y range to the finite values of every series of the plot (padded a little).
void fit_y(PlotFrame& frame, const std::vector<const std::vector<Summary>*>& series);
int frame_columns(const PlotFrame& frame);

// One y tick of a plot: a grid line at `y`, and a label unless it would overlap the one below.
struct AxisTick {
  double value = 0;
  float y = 0;
  std::string label;   // empty: grid line only
};
// The y ticks of `frame` for a font of `font_px`, from the bottom up; labels at least 1.1 lines apart.
std::vector<AxisTick> y_axis_ticks(const PlotFrame& frame, float font_px);

void draw_axes(ImDrawList* draw, const PlotFrame& frame, const char* title);
// Step ticks and labels under the plot area; `offset` moves each tick within its step (0.5:
// the middle of a heatmap column that spans [step, step + 1)).
void draw_step_axis(ImDrawList* draw, const PlotFrame& frame, double offset);
// `bridge_columns`: empty columns (no sample) up to this many in a row are joined over rather
// than breaking the trace: a series sampled every few steps by design (a wide model's layers,
// sent per layer every 16 steps) reads as a line, not as dots. Non-finite columns always break it.
void draw_series(ImDrawList* draw, const PlotFrame& frame, const std::vector<Summary>& columns,
                 ImU32 colour, int bridge_columns = 0);
// How many columns of `grid` span `steps` steps (0 for 0 steps): the bridge for a series
// sampled every `steps` steps.
int bridge_columns(const ColumnGrid& grid, int64_t steps);
// A thin vertical line on each column whose max is at least 0.5: `flags` is a 0/1 series
// such as "skipped", summarised on the same columns.
void draw_flag_columns(ImDrawList* draw, const PlotFrame& frame, const std::vector<Summary>& flags,
                       ImU32 colour);
// The colour of the marked step (AppState::marked_step, the run's first non-finite).
inline constexpr ImU32 kMarkedStepColour = IM_COL32(255, 70, 200, 255);
// The colour of the newest warning's step (AppState::warning_step), the warning banner's amber.
inline constexpr ImU32 kWarningStepColour = IM_COL32(255, 190, 40, 255);
// A marker on `step`: a triangle above the plot area pointing at it, and either a line
// through the plot (`across`) or a second triangle below it, on the step axis (a heatmap
// keeps its cells visible).
void draw_step_marker(ImDrawList* draw, const PlotFrame& frame, int64_t step, bool across,
                      ImU32 colour = kMarkedStepColour);
// The warning's step, the marked step (over it where they are one), the shared cursor and the
// selected step.
void draw_cursors(ImDrawList* draw, const PlotFrame& frame, const AppState& state, bool marker_across = true);

// Mouse over the plot area: wheel zooms around the mouse, left-drag pans, hover sets the
// shared cursor. Call right after begin_plot.
void handle_plot_input(const PlotFrame& frame, AppState& state);

// One series of a plot_series() call.
struct SeriesSpec {
  const SeriesHistory* history;
  const char* label;
  ImU32 colour;
  // Another run's skipped updates (its GlobalSeries::kSkipped), marked in this series' colour
  // where several runs share a plot; null: none of its own.
  const SeriesHistory* skipped = nullptr;
  // The whole name when `label` is a shortened one (an overlaid run's): shown in a tooltip
  // over its legend entry. Null: the label is whole.
  const char* full_label = nullptr;
  // Samples this many steps apart are joined (draw_series' bridge): 0 for a series of every step.
  int64_t sampled_every = 0;
  // The series' copies in a rewound run's abandoned spans (ui/abandoned_series.hpp), drawn
  // greyed under it: the steps the continuation took the numbers of.
  std::vector<const SeriesHistory*> abandoned{};
};

// A whole step plot over the shared view range of `state`: axes, one min/max trace per series
// (over its abandoned spans' traces, greyed),
// skipped steps marked (when `skipped` is given, and each series' own `skipped`), cursors, mouse input and a hover read-out
// of every series at the cursor step (over a shortened legend entry: its full_label instead).
void plot_series(const char* title, ImVec2 size, const std::vector<SeriesSpec>& series, bool log_y,
                 AppState& state, const SeriesHistory* skipped);

// "1.5e-03", "0.25", "1200": short and readable in a tick label or read-out.
std::string format_value(double value);

}  // namespace keel::app::ui
