#include "ui/layer_list.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <string>

#include "model/column_grid.hpp"
#include "model/module_tree.hpp"
#include "ui/colormap.hpp"
#include "ui/fonts.hpp"
#include "ui/metric_styles.hpp"
#include "ui/plot.hpp"
#include "ui/text_fit.hpp"

namespace keel::app::ui {
namespace {

using wire::LayerMetric;

// Table columns after the name; the sort key of each.
constexpr auto& kValueColumns = wire::kListColumnMetrics;
constexpr int kValueCount = static_cast<int>(std::size(kValueColumns));
// Above these a layer is worth a look: updates over 1% of the weights per step, or a gradient
// that is mostly exact zeros (underflow, dead units).
constexpr float kLargeUpdateRatio = 1e-2f;
constexpr float kMostlyZero = 0.5f;

constexpr ImU32 kBadHealth = IM_COL32(255, 70, 70, 255);
constexpr ImU32 kOffHealth = IM_COL32(255, 170, 40, 255);
constexpr ImU32 kGoodHealth = IM_COL32(80, 200, 100, 255);

// A layer's health, or a module's from its folded values (which are its worst layer's, so the
// module is as bad as its worst layer). `value` reads a metric's latest value; `received`:
// whether a grad norm ever arrived (NaN is both "never received" and a NaN norm; only the
// second is bad).
template <typename Value>
ImU32 health_from(Value&& value, bool received) {
  if (value(LayerMetric::kGradNonfinite) > 0 || (received && !std::isfinite(value(LayerMetric::kGradNorm)))) {
    return kBadHealth;
  }
  if (value(LayerMetric::kUpdateRatio) > kLargeUpdateRatio || value(LayerMetric::kGradZeroFrac) > kMostlyZero) {
    return kOffHealth;
  }
  return received ? kGoodHealth : kNoGradientText;
}

ImU32 health_colour(const RunModel& run, size_t layer) {
  if (run.gradient_state(layer) != GradientState::kMeasured) return kNoGradientText;
  return health_from([&](LayerMetric metric) { return run.latest(layer, metric); },
                     run.latest_step(layer, LayerMetric::kGradNorm) >= 0);
}

ImU32 module_health_colour(const RunModel& run, size_t module) {
  return health_from([&](LayerMetric metric) { return run.module_latest(module, metric); },
                     run.module_latest_step(module, LayerMetric::kGradNorm) >= 0);
}

// The module's worst layer now: the first with a non-finite gradient, else the largest grad
// norm. One pass over its layers' latest values: cheap enough for a hover.
int worst_layer_now(const RunModel& run, const ModuleNode& node) {
  int worst = -1;
  float worst_norm = -1;
  for (size_t layer = node.first_layer; layer < node.end_layer && layer < run.layer_count(); ++layer) {
    const float norm = run.latest(layer, LayerMetric::kGradNorm);
    const bool received = run.latest_step(layer, LayerMetric::kGradNorm) >= 0;
    if (run.latest(layer, LayerMetric::kGradNonfinite) > 0 || (received && !std::isfinite(norm))) return int(layer);
    if (received && norm > worst_norm) {
      worst = int(layer);
      worst_norm = norm;
    }
  }
  return worst;
}

// A value cell: "-" for a missing value (the grad norm shows NaN: a NaN norm is the news), red
// for a non-finite one or a non-zero non-finite count.
void value_cell(float value, LayerMetric metric) {
  const bool bad = !std::isfinite(value) && !std::isnan(value);
  const std::string text = std::isnan(value) && metric != LayerMetric::kGradNorm ? std::string("-") : format_value(value);
  if (bad || (metric == LayerMetric::kGradNonfinite && value > 0)) {
    ImGui::TextColored(ImVec4(1, 0.3f, 0.3f, 1), "%s", text.c_str());
  } else {
    ImGui::TextUnformatted(text.c_str());
  }
}

void health_dot(ImU32 colour) {
  const float font = ImGui::GetFontSize();
  const ImVec2 p = ImGui::GetCursorScreenPos();
  if (ImGui::IsRectVisible(ImVec2(font, font))) {
    ImGui::GetWindowDrawList()->AddCircleFilled(ImVec2(p.x + font * 0.35f, p.y + font * 0.55f), font * 0.3f, colour);
  }
  ImGui::SetCursorScreenPos(ImVec2(p.x + font * 0.9f, p.y));
}

// Module paths nest four or five deep; full indentation would leave no room for names.
float indent_px(int depth) { return float(depth) * ImGui::GetFontSize() * 0.7f; }

// Sorts NaN last whichever the direction: a missing value is never "the largest".
bool less_by(const RunModel& run, LayerMetric metric, bool ascending, int a, int b) {
  const float va = run.latest(size_t(a), metric), vb = run.latest(size_t(b), metric);
  if (std::isnan(va) != std::isnan(vb)) return std::isnan(vb);
  if (va == vb) return a < b;
  return ascending ? va < vb : va > vb;
}

float text_width(const std::string& text) { return ImGui::CalcTextSize(text.c_str()).x; }

// `summarize(grid, out)` fills the grid's columns: a layer's series, or a module's cells;
// `sampled_every`: the steps between its samples by design (draw_series' bridge), 0 for every step.
template <typename Summarize>
void sparkline(Summarize&& summarize, const AppState& state, ImVec2 size, int64_t sampled_every = 0) {
  const ImVec2 at = ImGui::GetCursorScreenPos();
  ImGui::Dummy(size);
  // A row scrolled out of the table's view costs neither a model query nor vertices: with
  // 1,000 layers the sparklines were most of the frame's half a million vertices.
  if (!ImGui::IsItemVisible()) return;
  PlotFrame frame;
  frame.min = at;
  frame.max = ImVec2(at.x + size.x, at.y + size.y);
  frame.log_y = true;
  const ColumnGrid grid(int64_t(std::floor(state.view_first())), int64_t(std::ceil(state.view_last())),
                        std::max(1, int(size.x)));
  std::vector<Summary> columns(size_t(grid.columns()));
  summarize(grid, columns.data());
  fit_y(frame, {&columns});
  draw_series(ImGui::GetWindowDrawList(), frame, columns, IM_COL32(150, 200, 255, 255),
              bridge_columns(grid, sampled_every));
}

}  // namespace

void LayerList::draw_row(const RunModel& run, AppState& state, int layer, const std::string& name,
                         size_t shared_parts, int depth) {
  ImGui::TableNextRow();
  ImGui::TableSetColumnIndex(0);
  // A leaf's dot sits where its module's arrow does, so leaves line up under their module.
  if (depth > 0) ImGui::SetCursorPosX(ImGui::GetCursorPosX() + indent_px(depth));
  health_dot(health_colour(run, size_t(layer)));
  // Shortened where it says least, never cut at its end: the tooltip has it whole.
  const std::string label = fit_layer_name(name, shared_parts, ImGui::GetContentRegionAvail().x, text_width, ellipsis());
  ImGui::PushID(layer);
  if (ImGui::Selectable(label.c_str(), layer == state.selected_layer(),
                        ImGuiSelectableFlags_SpanAllColumns)) {
    state.select_layer(layer, run.layer_name(size_t(layer)));
  }
  // A selection made for the user (the first non-finite): its row into view.
  if (layer == state.selected_layer() && state.scroll_to_selection()) ImGui::SetScrollHereY(0.5f);
  if (ImGui::IsItemHovered()) {
    std::string tip = run.layer_name(size_t(layer));
    const auto& aliases = run.layer_aliases(size_t(layer));
    for (size_t a = 0; a < aliases.size(); ++a) tip += (a ? ", " : "\nalso named ") + aliases[a];
    const GradientState gradient = run.gradient_state(size_t(layer));
    if (gradient != GradientState::kMeasured) tip += std::string("\n") + gradient_state_reason(gradient);
    // Values older than the module's are the probe's cadence (module rollups), not a stall.
    const int64_t values_step = run.latest_step(size_t(layer), LayerMetric::kGradNorm);
    if (const std::string cadence = layer_cadence(run); !cadence.empty() && values_step < run.last_step()) {
      tip += "\nvalues of step " + std::to_string(values_step) + " (" + cadence + ")";
    }
    ImGui::SetTooltip("%s", tip.c_str());
  }
  ImGui::PopID();
  for (int c = 0; c < kValueCount; ++c) {
    ImGui::TableSetColumnIndex(c + 1);
    // A frozen or unused layer has no gradient of this step's: say so instead of its last
    // trained values.
    const GradientState gradient = run.gradient_state(size_t(layer));
    if (gradient != GradientState::kMeasured && is_gradient_metric(kValueColumns[c])) {
      ImGui::TextDisabled("%s", gradient_state_name(gradient));
      continue;
    }
    value_cell(run.latest(size_t(layer), kValueColumns[c]), kValueColumns[c]);
  }
  ImGui::TableSetColumnIndex(kValueCount + 1);
  const float font = ImGui::GetFontSize();
  const SeriesHistory& series = run.layer_series(size_t(layer), LayerMetric::kGradNorm);
  sparkline([&](const ColumnGrid& grid, Summary* out) { series.summarize(grid, out); }, state,
            ImVec2(std::max(font * 3, ImGui::GetContentRegionAvail().x), font),
            run.description().modules.empty() ? 0 : run.layer_detail_every());
}

void LayerList::draw_module_row(const RunModel& run, AppState& state, const ModuleRow& row) {
  const ModuleNode& node = run.modules().module(row.index);
  ImGui::TableNextRow();
  ImGui::TableSetColumnIndex(0);
  if (row.depth > 0) ImGui::SetCursorPosX(ImGui::GetCursorPosX() + indent_px(row.depth));
  if (row.open) {
    // No dot: its layers below have theirs. The arrow lines up with the folded modules' dots.
    ImGui::SetCursorPosX(ImGui::GetCursorPosX() + ImGui::GetFontSize() * 0.9f);
  } else {
    health_dot(module_health_colour(run, row.index));
  }
  const std::string label = node.name() + "  (" + std::to_string(node.layers()) + ")";
  ImGui::PushID(int(row.index));
  ImGui::PushID("module");
  // A folded module holding the selected layer is where the selection is.
  const int selected = state.selected_layer();
  const bool holds_selection = !row.open && selected >= int(node.first_layer) && selected < int(node.end_layer);
  ImGui::SetNextItemOpen(row.open, ImGuiCond_Always);
  const bool open = ImGui::TreeNodeEx(label.c_str(), ImGuiTreeNodeFlags_NoTreePushOnOpen | ImGuiTreeNodeFlags_SpanFullWidth |
                                                         (holds_selection ? ImGuiTreeNodeFlags_Selected : 0));
  if (open != row.open) state.set_module_open(node.path, open);
  if (ImGui::IsItemHovered()) {
    std::string tip = node.path + ": " + std::to_string(node.layers()) + " tensors, " +
                      (row.open ? "open" : "folded: the values are its worst tensor's, the non-finite count their sum");
    const int worst = worst_layer_now(run, node);
    if (worst >= 0 && layer_cadence(run).empty()) {
      tip += "\nworst now: " + run.layer_name(size_t(worst));
    } else if (worst >= 0) {
      // Its values are every step's; its layers' only the per-layer steps'.
      tip += "\nworst at step " + std::to_string(run.last_layer_values_step()) + ": " + run.layer_name(size_t(worst));
    }
    ImGui::SetTooltip("%s", tip.c_str());
  }
  ImGui::PopID();
  ImGui::PopID();
  // An open module's layers are the rows under it: its own values would only repeat them.
  if (row.open) return;
  for (int c = 0; c < kValueCount; ++c) {
    ImGui::TableSetColumnIndex(c + 1);
    value_cell(run.module_latest(row.index, kValueColumns[c]), kValueColumns[c]);
  }
  ImGui::TableSetColumnIndex(kValueCount + 1);
  const float font = ImGui::GetFontSize();
  // A module below the described ones has only the per-layer steps, as its layers.
  const bool sampled = !run.description().modules.empty() && !run.module_has_rollups(row.index);
  sparkline([&](const ColumnGrid& grid, Summary* out) {
              run.module_summarize(row.index, LayerMetric::kGradNorm, grid, out);
            },
            state, ImVec2(std::max(font * 3, ImGui::GetContentRegionAvail().x), font),
            sampled ? run.layer_detail_every() : 0);
}

void LayerList::draw_tree(const RunModel& run, AppState& state) {
  const std::vector<ModuleRow>& rows = tree_rows_.rows(run.modules(), state);
  if (flat_shown_ || order_rows_version_ != tree_rows_.version()) {
    order_.clear();
    for (const ModuleRow& row : rows) {
      if (!row.module) order_.push_back(int(row.index));
    }
    order_rows_version_ = tree_rows_.version();
    flat_shown_ = false;
  }
  ImGuiListClipper clipper;
  clipper.Begin(int(rows.size()));
  const int selected = state.selected_layer();
  if (state.scroll_to_selection() && selected >= 0) {
    const int row = tree_rows_.row_of_layer(size_t(selected));
    if (row >= 0) clipper.ForceDisplayRangeByIndices(row, row + 1);
  }
  while (clipper.Step()) {
    for (int i = clipper.DisplayStart; i < clipper.DisplayEnd; ++i) {
      const ModuleRow& row = rows[size_t(i)];
      if (row.module) {
        draw_module_row(run, state, row);
      } else {
        const std::string& name = run.layer_name(row.index);
        draw_row(run, state, int(row.index), name.substr(run.modules().leaf_offset(row.index)), 0, row.depth);
      }
    }
  }
}

void LayerList::draw_flat(const RunModel& run, AppState& state, int sort_column, bool ascending) {
  FlatKey key;
  key.run = &run;
  key.layers = run.layer_count();
  key.filter = filter_.InputBuf;
  key.sort_column = sort_column;
  key.ascending = ascending;
  key.step = sort_column > 0 ? run.last_step() : -1;
  if (!flat_shown_ || !(key == flat_key_)) {
    flat_key_ = key;
    flat_shown_ = true;
    order_.clear();
    for (size_t i = 0; i < run.layer_count(); ++i) {
      if (filter_.PassFilter(run.layer_name(i).c_str())) order_.push_back(int(i));
    }
    if (sort_column > 0) {
      const LayerMetric metric = kValueColumns[sort_column - 1];
      std::stable_sort(order_.begin(), order_.end(), [&](int a, int b) { return less_by(run, metric, ascending, a, b); });
    } else if (!ascending) {
      std::reverse(order_.begin(), order_.end());
    }
    // Rows that all share a start ("blocks." for a filter of "mlp") show what differs.
    std::vector<std::string> names;
    names.reserve(order_.size());
    for (int layer : order_) names.push_back(run.layer_name(size_t(layer)));
    flat_shared_parts_ = shared_leading_parts(names);
  }
  ImGuiListClipper clipper;
  clipper.Begin(int(order_.size()));
  if (state.scroll_to_selection()) {
    const auto at = std::find(order_.begin(), order_.end(), state.selected_layer());
    if (at != order_.end()) clipper.ForceDisplayRangeByIndices(int(at - order_.begin()), int(at - order_.begin()) + 1);
  }
  while (clipper.Step()) {
    for (int i = clipper.DisplayStart; i < clipper.DisplayEnd; ++i) {
      const int layer = order_[size_t(i)];
      draw_row(run, state, layer, run.layer_name(size_t(layer)), flat_shared_parts_, 0);
    }
  }
}

void LayerList::draw(const RunModel& run, AppState& state) {
  filter_.Draw("filter", ImGui::GetFontSize() * 12);
  const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY |
                                ImGuiTableFlags_Resizable | ImGuiTableFlags_Sortable |
                                ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_SizingFixedFit;
  if (!ImGui::BeginTable("layers", kValueCount + 2, flags | ImGuiTableFlags_Hideable)) return;
  ImGui::TableSetupScrollFreeze(1, 1);
  ImGui::TableSetupColumn("layer", ImGuiTableColumnFlags_WidthStretch | ImGuiTableColumnFlags_DefaultSort |
                                       ImGuiTableColumnFlags_NoHide,
                          2.0f);
  for (int c = 0; c < kValueCount; ++c) {
    const MetricStyle& style = style_of(kValueColumns[c]);
    // Wide enough for its header and the sort arrow: "non-finite" was cut to "non-fi...".
    const float width = std::max(ImGui::GetFontSize() * 4.2f, ImGui::CalcTextSize(style.column).x + ImGui::GetFontSize() * 1.2f);
    ImGui::TableSetupColumn(style.column,
                            ImGuiTableColumnFlags_PreferSortDescending | ImGuiTableColumnFlags_WidthFixed |
                                (style.column_starts_hidden ? ImGuiTableColumnFlags_DefaultHide : 0),
                            width);
  }
  ImGui::TableSetupColumn("trend", ImGuiTableColumnFlags_WidthFixed | ImGuiTableColumnFlags_NoSort,
                          ImGui::GetFontSize() * 4);
  ImGui::TableHeadersRow();

  int sort_column = 0;
  bool ascending = true;
  if (const ImGuiTableSortSpecs* specs = ImGui::TableGetSortSpecs(); specs && specs->SpecsCount > 0) {
    sort_column = specs->Specs[0].ColumnIndex;
    ascending = specs->Specs[0].SortDirection == ImGuiSortDirection_Ascending;
  }
  if (sort_column > 0 || filter_.IsActive() || !ascending) {
    draw_flat(run, state, sort_column, ascending);
  } else {
    draw_tree(run, state);
  }
  ImGui::EndTable();
}

}  // namespace keel::app::ui
