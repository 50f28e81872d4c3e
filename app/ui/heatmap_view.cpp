#include "ui/heatmap_view.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <limits>

#include <imgui.h>

#include "model/column_grid.hpp"
#include "model/module_tree.hpp"
#include "ui/colormap.hpp"
#include "ui/abandoned_series.hpp"
#include "ui/image_texture.hpp"
#include "ui/plot.hpp"
#include "ui/verbose_log.hpp"

namespace keel::app::ui {
namespace {

constexpr float kMaxRowPx = 22.0f;
constexpr float kMinRowPx = 3.0f;
// A non-finite cell is never smaller than this, however many steps a pixel holds: a 4x5 px
// cell was all a new user had to find the NaN by.
constexpr float kMinNonfinitePx = 8.0f;
constexpr ImU32 kNonfiniteOutline = IM_COL32(255, 32, 64, 255);
constexpr ImU32 kNonfiniteLabel = IM_COL32(255, 80, 80, 255);
constexpr ImU32 kSelectedRowColour = IM_COL32(255, 255, 255, 220);

// `no_gradient`: a row in view is greyed for a layer without a gradient; its swatch is shown.
void draw_legend(double lo, double hi, bool no_gradient) {
  ImDrawList* draw = ImGui::GetWindowDrawList();
  const float font = ImGui::GetFontSize();
  const float bar_w = font * 10, bar_h = font * 0.8f;
  ImGui::Text("log10 %+.1f", lo);
  ImGui::SameLine();
  const ImVec2 bar = ImGui::GetCursorScreenPos();
  ImGui::Dummy(ImVec2(bar_w, font));
  const int steps = 32;
  for (int i = 0; i < steps; ++i) {
    const float x0 = bar.x + bar_w * float(i) / steps, x1 = bar.x + bar_w * float(i + 1) / steps;
    draw->AddRectFilled(ImVec2(x0, bar.y + font * 0.1f), ImVec2(x1, bar.y + font * 0.1f + bar_h),
                        viridis(float(i) / (steps - 1)));
  }
  ImGui::SameLine();
  ImGui::Text("%+.1f", hi);
  auto swatch = [&](Rgba colour, const char* label) {
    ImGui::SameLine();
    const ImVec2 p = ImGui::GetCursorScreenPos();
    ImGui::Dummy(ImVec2(font, font));
    draw->AddRectFilled(ImVec2(p.x, p.y + font * 0.1f), ImVec2(p.x + font, p.y + font * 0.9f), colour);
    ImGui::SameLine();
    ImGui::TextUnformatted(label);
  };
  swatch(kNonfiniteColour, "NaN/Inf");
  swatch(kSkippedColour, "skipped");
  if (no_gradient) swatch(kNoGradientColour, "no gradient");
}

}  // namespace

void HeatmapView::draw(const RunModel& run, AppState& state) {
  draw_metric_choice(state);
  const std::vector<ModuleRow>& tree_rows = rows_.rows(run.modules(), state);
  const size_t rows = tree_rows.size();
  if (run.layer_count() == 0 || rows == 0) {
    ImGui::TextDisabled("no layers yet");
    return;
  }
  Layout layout = lay_out(rows, state);
  PlotFrame& frame = layout.frame;
  ImGui::SetCursorScreenPos(ImVec2(frame.min.x, layout.origin.y));
  ImGui::InvisibleButton("heatmap", ImVec2(std::max(1.0f, frame.max.x - frame.min.x), frame.max.y - layout.origin.y));
  frame.hovered = ImGui::IsItemHovered();
  frame.active = ImGui::IsItemActive();
  handle_plot_input(frame, state);
  // The row showing the selected layer: its own, or the folded module holding it.
  const int selected_row = state.selected_layer() >= 0 ? rows_.row_of_layer(size_t(state.selected_layer())) : -1;
  // A selection made for the user: its row into view when the pane scrolls (many layers).
  if (state.scroll_to_selection() && selected_row >= 0) {
    const float row_y = frame.min.y + (float(selected_row) + 0.5f) * layout.row_px;
    ImGui::SetScrollFromPosY(row_y - ImGui::GetWindowPos().y, 0.5f);
  }

  const ColumnGrid grid(layout.first_step, layout.last_step, frame_columns(frame));
  const size_t columns = size_t(grid.columns());
  ImDrawList* draw = ImGui::GetWindowDrawList();
  // Only the rows inside the pane's clip rectangle are queried and drawn: at 1,000 layers the
  // pane scrolls and shows a few hundred, and the per-cell work is the frame's cost. The
  // colour scale spans the visible cells.
  const auto visible_row = [&](float y) {
    return size_t(std::clamp(std::floor((y - frame.min.y) / layout.row_px), 0.0f, float(rows)));
  };
  const size_t r0 = visible_row(draw->GetClipRectMin().y);
  const size_t r1 = std::max(r0, std::min(rows, visible_row(draw->GetClipRectMax().y) + 1));
  query_cells(run, state, tree_rows, grid, r0, r1);
  // Cells become texels of one image, drawn as one textured quad per row: a quad per cell
  // (a few hundred thousand of them) was most of the frame and ~20 MB of vertices to draw.
  const float column_px = (frame.max.x - frame.min.x) / float(columns);
  image_.build(cells_, r1 - r0, columns, int(std::ceil(kMinNonfinitePx / column_px)), no_gradient_);
  if (query_abandoned(run, state, tree_rows, grid, r0, r1)) image_.grey_abandoned(cells_, abandoned_cells_);
  if (!texture_) texture_ = make_image_texture();
  const ImTextureID texture = texture_->update(image_.pixels().data(), int(columns), int(r1 - r0));

  draw_skipped_strip(draw, layout, column_px);
  draw_rows(draw, texture, layout, columns, r0, r1);
  draw_row_labels(run, tree_rows, selected_row, frame.min, layout.row_px, r0, r1);
  if (selected_row >= 0) {
    // Outside the row, so the outline never hides a cell.
    const float y0 = frame.min.y + float(selected_row) * layout.row_px;
    draw->AddRect(ImVec2(frame.min.x - 2, y0 - 2), ImVec2(frame.max.x + 2, y0 + layout.row_px + 1), kSelectedRowColour);
  }
  draw_cursors(draw, frame, state, /*marker_across=*/false);
  draw_step_axis(draw, frame, 0.5);
  log_geometry(frame.min.x, frame.min.y, frame.max.x, layout.row_px, run.layer_count(), tree_rows);
  hover(run, state, layout, grid, tree_rows, r0, r1);

  ImGui::SetCursorScreenPos(ImVec2(layout.origin.x, frame.max.y + layout.axis_h + ImGui::GetFontSize() * 0.3f));
  draw_legend(image_.log_low(), image_.log_high(),
              std::find(no_gradient_.rows.begin(), no_gradient_.rows.end(), true) != no_gradient_.rows.end());
}

bool HeatmapView::query_abandoned(const RunModel& run, const AppState& state, const std::vector<ModuleRow>& tree_rows,
                                  const ColumnGrid& grid, size_t r0, size_t r1) {
  if (run.abandoned_spans().empty()) return false;
  const size_t columns = size_t(grid.columns());
  abandoned_cells_.assign((r1 - r0) * columns, Summary{});
  for (size_t r = r0; r < r1; ++r) {
    if (tree_rows[r].module) continue;
    const std::vector<const SeriesHistory*> spans = abandoned_layer_series(run, tree_rows[r].index, state.heat_metric);
    if (spans.empty()) continue;
    summarize_abandoned(spans, grid, abandoned_cells_.data() + (r - r0) * columns, abandoned_scratch_);
  }
  return true;
}

void HeatmapView::draw_metric_choice(AppState& state) {
  bool first = true;
  for (const wire::LayerMetric metric : wire::kHeatmapMetrics) {
    if (!first) ImGui::SameLine();
    first = false;
    if (ImGui::RadioButton(wire::info_of(metric).label, state.heat_metric == metric)) state.heat_metric = metric;
  }
}

HeatmapView::Layout HeatmapView::lay_out(size_t rows, const AppState& state) {
  Layout layout;
  const float font = ImGui::GetFontSize();
  layout.origin = ImGui::GetCursorScreenPos();
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float gutter = std::min(font * 12.0f, avail.x * 0.3f);
  const float strip = font * 0.5f;  // skipped-steps strip above the rows
  const float legend_h = font * 1.6f;
  layout.axis_h = font * 1.3f;
  const float rows_h = std::max(avail.y - strip - layout.axis_h - legend_h - font * 1.3f, float(rows) * kMinRowPx);
  layout.row_px = std::clamp(std::floor(rows_h / float(rows)), kMinRowPx, kMaxRowPx);
  PlotFrame& frame = layout.frame;
  // Whole pixels: rows and the selection's outline land on pixel rows, crisp at any size.
  frame.min = ImVec2(std::floor(layout.origin.x + gutter), std::floor(layout.origin.y + strip));
  frame.max = ImVec2(std::floor(layout.origin.x + avail.x - font * 0.5f), frame.min.y + layout.row_px * float(rows));
  layout.first_step = int64_t(std::floor(state.view_first()));
  layout.last_step = int64_t(std::ceil(state.view_last()));
  frame.x_first = double(layout.first_step);
  frame.x_last = double(layout.last_step + 1);
  return layout;
}

void HeatmapView::query_cells(const RunModel& run, const AppState& state, const std::vector<ModuleRow>& tree_rows,
                              const ColumnGrid& grid, size_t r0, size_t r1) {
  const size_t columns = size_t(grid.columns());
  // A folded module's row is its module's cells (RunModel::module_summarize): per step the
  // worst of its layers, so a cell is the worst of its layers over the cell's steps, and a
  // non-finite layer flags it.
  const wire::LayerMetric metric = state.heat_metric;
  cells_.resize((r1 - r0) * columns);
  for (size_t r = r0; r < r1; ++r) {
    const ModuleRow& row = tree_rows[r];
    Summary* out = cells_.data() + (r - r0) * columns;
    if (row.module) {
      run.module_summarize(row.index, metric, grid, out);
    } else {
      run.layer_series(row.index, metric).summarize(grid, out);
    }
  }
  skipped_.resize(columns);
  run.global_series(GlobalSeries::kSkipped).summarize(grid, skipped_.data());

  // A frozen or unused layer has no gradient samples: its gaps are greyed, not left as "no
  // data", so it does not read as a dead layer (its weight metrics it still has).
  std::vector<bool>& no_gradient_rows = no_gradient_.rows;
  no_gradient_rows.assign(r1 - r0, false);
  if (is_gradient_metric(metric)) {
    for (size_t r = r0; r < r1; ++r) {
      no_gradient_rows[r - r0] = !tree_rows[r].module && run.gradient_state(tree_rows[r].index) != GradientState::kMeasured;
    }
  }
  // Only where the run has steps: past its last step there is nothing to be missing.
  const int64_t grid_last = grid.start(grid.columns()) - 1;
  const bool run_in_view = run.has_steps() && run.last_step() >= grid.start(0) && run.first_step() <= grid_last;
  no_gradient_.first_column = run_in_view ? size_t(grid.column_of(std::max(run.first_step(), grid.start(0)))) : 0;
  no_gradient_.end_column = run_in_view ? size_t(grid.column_of(std::min(run.last_step(), grid_last))) + 1 : 0;
}

void HeatmapView::draw_skipped_strip(ImDrawList* draw, const Layout& layout, float column_px) const {
  const PlotFrame& frame = layout.frame;
  for (size_t c = 0; c < skipped_.size(); ++c) {
    if (skipped_[c].has_finite() && skipped_[c].max >= 0.5f) {
      const float x = frame.min.x + float(c) * column_px;
      draw->AddRectFilled(ImVec2(x, layout.origin.y), ImVec2(x + std::max(1.0f, column_px), frame.min.y - 1),
                          kSkippedColour);
    }
  }
}

void HeatmapView::draw_rows(ImDrawList* draw, ImTextureID texture, const Layout& layout, size_t columns, size_t r0,
                            size_t r1) {
  const PlotFrame& frame = layout.frame;
  const float row_px = layout.row_px;
  const float column_px = (frame.max.x - frame.min.x) / float(columns);
  const float texel_v = 1.0f / float(r1 - r0);
  nonfinite_rows_.assign(r1 - r0, false);
  for (size_t r = r0; r < r1; ++r) {
    // Tall rows keep a one-pixel gap so that neighbouring layers read as separate bands.
    const float y0 = frame.min.y + float(r) * row_px, y1 = y0 + row_px - (row_px > 6 ? 1 : 0);
    const float v0 = float(r - r0) * texel_v;
    draw->AddImage(texture, ImVec2(frame.min.x, y0), ImVec2(frame.max.x, y1), ImVec2(0, v0),
                   ImVec2(1, v0 + texel_v));
    // Each run of non-finite cells gets an outline at least kMinNonfinitePx tall, however
    // thin the rows: a NaN is never a few pixels to hunt for.
    const Summary* row_cells = &cells_[(r - r0) * columns];
    for (size_t c = 0; c < columns;) {
      if (!row_cells[c].has_nonfinite()) {
        ++c;
        continue;
      }
      size_t end = c;
      while (end < columns && row_cells[end].has_nonfinite()) ++end;
      nonfinite_rows_[r - r0] = true;
      const float mid_x = frame.min.x + (float(c) + float(end)) * 0.5f * column_px;
      const float half_w = std::max(kMinNonfinitePx, float(end - c) * column_px) * 0.5f;
      const float half_h = std::max(kMinNonfinitePx, row_px) * 0.5f;
      const float mid_y = (y0 + y1) * 0.5f;
      draw->AddRect(ImVec2(mid_x - half_w - 1, mid_y - half_h - 1), ImVec2(mid_x + half_w + 1, mid_y + half_h + 1),
                    kNonfiniteOutline, 0.0f, 0, 2.0f);
      c = end;
    }
  }
}

void HeatmapView::hover(const RunModel& run, AppState& state, const Layout& layout, const ColumnGrid& grid,
                        const std::vector<ModuleRow>& tree_rows, size_t r0, size_t r1) {
  const PlotFrame& frame = layout.frame;
  const ImGuiIO& io = ImGui::GetIO();
  if (!frame.hovered || r1 <= r0 || io.MousePos.y < frame.min.y || io.MousePos.y >= frame.max.y) return;
  const size_t r = std::clamp(size_t((io.MousePos.y - frame.min.y) / layout.row_px), r0, r1 - 1);
  const int64_t step = std::llround(frame.step_at(io.MousePos.x) - 0.5);
  const int c = grid.column_of(step);
  const Summary& cell = cells_[(r - r0) * size_t(grid.columns()) + size_t(c)];
  const ModuleRow& row = tree_rows[r];
  const bool clicked = ImGui::IsMouseReleased(ImGuiMouseButton_Left) && io.MouseDragMaxDistanceSqr[0] < 16.0f;
  if (row.module) {
    module_tooltip(run, state, row.index, grid, c, cell);
    // A click opens the module, here and in the layer list: its layers' own rows then show
    // which one is bad (the hover names the worst already). Selecting the worst layer instead
    // would select one that no row shows, and hide its siblings that may be as bad.
    if (clicked) state.set_module_open(run.modules().module(row.index).path, true);
    return;
  }
  const size_t layer = row.index;
  layer_tooltip(run, state, layer, grid, c, step, cell, no_gradient_.rows[r - r0]);
  // A click (not the end of a drag) selects the cell's layer and step.
  if (clicked) state.select(int(layer), run.layer_name(layer), step);
}

void HeatmapView::layer_tooltip(const RunModel& run, const AppState& state, size_t layer, const ColumnGrid& grid,
                                int c, int64_t step, const Summary& cell, bool no_gradient) {
  const char* label = wire::info_of(state.heat_metric).label;
  ImGui::BeginTooltip();
  ImGui::Text("%s", run.layer_name(layer).c_str());
  ImGui::Text("steps %lld..%lld", static_cast<long long>(grid.start(c)), static_cast<long long>(grid.start(c + 1) - 1));
  float exact = 0;
  if (run.layer_series(layer, state.heat_metric).value_at(step, &exact)) {
    ImGui::Text("%s at step %lld: %s", label, static_cast<long long>(step), format_value(exact).c_str());
  } else if (cell.has_finite()) {
    ImGui::Text("%s: %s .. %s", label, format_value(cell.min).c_str(), format_value(cell.max).c_str());
  }
  if (cell.has_nonfinite()) ImGui::TextColored(ImVec4(1, 0.3f, 0.3f, 1), "non-finite values");
  if (no_gradient) ImGui::TextDisabled("%s", gradient_state_reason(run.gradient_state(layer)));
  ImGui::EndTooltip();
}

void HeatmapView::module_tooltip(const RunModel& run, const AppState& state, size_t module, const ColumnGrid& grid,
                                 int c, const Summary& cell) {
  const ModuleNode& node = run.modules().module(module);
  const wire::LayerMetric metric = state.heat_metric;
  const int64_t first = grid.start(c), last = grid.start(c + 1) - 1;
  // Which layer is worst over the cell: one query per layer of the module, so once per cell
  // hovered, not once per frame.
  if (worst_cell_ != WorstCell{&run, run.last_step(), module, first, last, metric}) {
    worst_cell_ = WorstCell{&run, run.last_step(), module, first, last, metric};
    worst_layer_ = run.worst_layer(module, metric, first, last);
  }
  ImGui::BeginTooltip();
  ImGui::Text("%s (%zu tensors, folded: a click opens it)", node.path.c_str(), node.layers());
  ImGui::Text("steps %lld..%lld", static_cast<long long>(first), static_cast<long long>(last));
  if (cell.has_finite()) {
    ImGui::Text("%s, worst of its tensors: %s", wire::info_of(state.heat_metric).label, format_value(cell.max).c_str());
  }
  if (worst_layer_ >= 0) {
    Summary worst;
    run.layer_series(size_t(worst_layer_), metric).summarize(ColumnGrid(first, last, 1), &worst);
    const std::string& name = run.layer_name(size_t(worst_layer_));
    if (worst.has_nonfinite()) {
      ImGui::TextColored(ImVec4(1, 0.3f, 0.3f, 1), "non-finite values, first in %s", name.c_str());
    } else {
      ImGui::Text("worst: %s (%s)", name.c_str(), format_value(worst.max).c_str());
    }
  } else if (cell.has_nonfinite()) {
    ImGui::TextColored(ImVec4(1, 0.3f, 0.3f, 1), "non-finite values");
  } else if (const std::string cadence = layer_cadence(run); !cadence.empty() && cell.has_finite()) {
    // A rollup step: the module's value came whole from the probe, its tensors' are not sent.
    ImGui::TextDisabled("no per-layer values in these steps (%s)", cadence.c_str());
  }
  ImGui::EndTooltip();
}

void HeatmapView::draw_row_labels(const RunModel& run, const std::vector<ModuleRow>& tree_rows, int selected,
                                  ImVec2 rows_min, float row_px, size_t r0, size_t r1) {
  // Rows whose names matter most get a label first; a label goes where it overlaps none
  // placed already. First the selected row, then rows with a non-finite cell in view or a
  // layer an event names, then the rows around the selection, then every few rows.
  const float font = ImGui::GetFontSize();
  const size_t rows = r1 - r0;
  if (rows == 0) return;
  // The layers events name, the first non-finite's too after the event list dropped it.
  event_layers_.clear();
  for (const wire::Event& event : run.events()) {
    if (!event.layer.empty()) event_layers_.insert(event.layer);
  }
  if (const auto& first = run.first_nonfinite(); first && !first->layer.empty()) event_layers_.insert(first->layer);
  named_rows_.assign(rows, false);
  for (size_t r = r0; r < r1; ++r) {
    const ModuleRow& row = tree_rows[r];
    if (!row.module) {
      named_rows_[r - r0] = event_layers_.count(run.layer_name(row.index)) != 0;
      continue;
    }
    // A folded module is named by an event when one of its layers is.
    const std::string& path = run.modules().module(row.index).path;
    named_rows_[r - r0] = std::any_of(event_layers_.begin(), event_layers_.end(), [&](const std::string& layer) {
      return layer.size() > path.size() && layer.compare(0, path.size(), path) == 0 && layer[path.size()] == '.';
    });
  }

  label_order_.clear();
  if (selected >= int(r0) && selected < int(r1)) label_order_.push_back(size_t(selected));
  for (size_t r = r0; r < r1; ++r) {
    if (nonfinite_rows_[r - r0]) label_order_.push_back(r);
  }
  for (size_t r = r0; r < r1; ++r) {
    if (named_rows_[r - r0] && !nonfinite_rows_[r - r0]) label_order_.push_back(r);
  }
  const size_t label_every = size_t(std::ceil(font * 1.05f / row_px));
  if (selected >= 0) {
    // The selection may be scrolled out of view: only its neighbours in view get a label.
    const auto in_view = [&](int r) { return r >= int(r0) && r < int(r1); };
    for (int d = 1; d <= int(3 * label_every); ++d) {
      if (in_view(selected - d)) label_order_.push_back(size_t(selected - d));
      if (in_view(selected + d)) label_order_.push_back(size_t(selected + d));
    }
  }
  for (size_t r = r0; r < r1; ++r) {
    if (r % label_every == 0) label_order_.push_back(r);
  }

  ImDrawList* draw = ImGui::GetWindowDrawList();
  placed_.clear();
  for (size_t r : label_order_) {
    const float y0 = rows_min.y + float(r) * row_px;
    const float text_y = y0 + (row_px - font) * 0.5f;
    const bool overlaps = std::any_of(placed_.begin(), placed_.end(), [&](float other) {
      return std::abs(other - text_y) < font * 1.05f;
    });
    if (overlaps) continue;
    placed_.push_back(text_y);
    // Names right-aligned in the gutter; a row with a non-finite cell in view in red. A folded
    // module's name ends with its count of tensors: it reads as a group, not a tensor.
    const ModuleRow& row = tree_rows[r];
    const std::string name = row.module ? run.modules().module(row.index).path + " [" +
                                              std::to_string(row.end_layer - row.first_layer) + "]"
                                        : run.layer_name(row.index);
    const ImVec2 size = ImGui::CalcTextSize(name.c_str());
    const ImU32 colour = nonfinite_rows_[r - r0]           ? kNonfiniteLabel
                         : int(r) == selected              ? IM_COL32(255, 255, 255, 255)
                         : named_rows_[r - r0]             ? IM_COL32(230, 200, 120, 255)
                         : no_gradient_.rows[r - r0]       ? kNoGradientText
                                                           : IM_COL32(150, 150, 160, 255);
    draw->AddText(ImVec2(rows_min.x - size.x - font * 0.3f, text_y), colour, name.c_str());
  }
}

void HeatmapView::log_geometry(float x0, float y0, float x1, float row_px, size_t layers,
                               const std::vector<ModuleRow>& rows) {
  const size_t folded = size_t(std::count_if(rows.begin(), rows.end(), [](const ModuleRow& row) { return row.module; }));
  char text[200];
  std::snprintf(text, sizeof text, "keel: heatmap x0 %.0f x1 %.0f y0 %.0f row %.2f layers %zu rows %zu folded %zu",
                x0, x1, y0, row_px, layers, rows.size(), folded);
  if (logged_geometry_ == text) return;
  logged_geometry_ = text;
  verbose_log("%s", text);
}

}  // namespace keel::app::ui
