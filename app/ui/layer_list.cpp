#include "ui/layer_list.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <string>

#include "model/column_grid.hpp"
#include "ui/colormap.hpp"
#include "ui/fonts.hpp"
#include "ui/metric_styles.hpp"
#include "ui/plot.hpp"
#include "ui/text_fit.hpp"

namespace keel::app::ui {
namespace {

using wire::LayerMetric;

// Table columns after the name; the sort key of each.
constexpr LayerMetric kValueColumns[] = {LayerMetric::kGradNorm, LayerMetric::kUpdateRatio,
                                         LayerMetric::kGradAbsmax, LayerMetric::kGradZeroFrac,
                                         LayerMetric::kGradNonfinite};
constexpr int kValueCount = static_cast<int>(std::size(kValueColumns));
// Above these a layer is worth a look: updates over 1% of the weights per step, or a gradient
// that is mostly exact zeros (underflow, dead units).
constexpr float kLargeUpdateRatio = 1e-2f;
constexpr float kMostlyZero = 0.5f;

ImU32 health_colour(const RunModel& run, size_t layer) {
  if (run.gradient_state(layer) != GradientState::kMeasured) return kNoGradientText;
  const float nonfinite = run.latest(layer, LayerMetric::kGradNonfinite);
  const float norm = run.latest(layer, LayerMetric::kGradNorm);
  // latest() is NaN both for "never received" and for a NaN norm; only the second is bad.
  const bool received = run.latest_step(layer, LayerMetric::kGradNorm) >= 0;
  if (nonfinite > 0 || (received && !std::isfinite(norm))) {
    return IM_COL32(255, 70, 70, 255);
  }
  if (run.latest(layer, LayerMetric::kUpdateRatio) > kLargeUpdateRatio ||
      run.latest(layer, LayerMetric::kGradZeroFrac) > kMostlyZero) {
    return IM_COL32(255, 170, 40, 255);
  }
  return IM_COL32(80, 200, 100, 255);
}

// Sorts NaN last whichever the direction: a missing value is never "the largest".
bool less_by(const RunModel& run, LayerMetric metric, bool ascending, int a, int b) {
  const float va = run.latest(size_t(a), metric), vb = run.latest(size_t(b), metric);
  if (std::isnan(va) != std::isnan(vb)) return std::isnan(vb);
  if (va == vb) return a < b;
  return ascending ? va < vb : va > vb;
}

float text_width(const std::string& text) { return ImGui::CalcTextSize(text.c_str()).x; }

// The tree's leaf: the parameter with its module ("fc.weight"), so that a leaf reads as more
// than "weight" or "bias"; the nodes above it are the rest of the path.
size_t leaf_parts(const std::vector<std::string>& parts) { return std::min<size_t>(2, parts.size()); }

void sparkline(const SeriesHistory& series, const AppState& state, ImVec2 size) {
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
  series.summarize(grid, columns.data());
  fit_y(frame, {&columns});
  draw_series(ImGui::GetWindowDrawList(), frame, columns, IM_COL32(150, 200, 255, 255));
}

}  // namespace

void LayerList::draw_row(const RunModel& run, AppState& state, int layer, const std::string& name,
                         size_t shared_parts) {
  ImGui::TableNextRow();
  ImGui::TableSetColumnIndex(0);
  ImDrawList* draw = ImGui::GetWindowDrawList();
  const float font = ImGui::GetFontSize();
  const ImVec2 p = ImGui::GetCursorScreenPos();
  if (ImGui::IsRectVisible(ImVec2(font, font))) {
    draw->AddCircleFilled(ImVec2(p.x + font * 0.35f, p.y + font * 0.55f), font * 0.3f,
                          health_colour(run, size_t(layer)));
  }
  ImGui::SetCursorScreenPos(ImVec2(p.x + font * 0.9f, p.y));
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
    const float value = run.latest(size_t(layer), kValueColumns[c]);
    const bool bad = !std::isfinite(value) && !std::isnan(value);
    const std::string text = std::isnan(value) && kValueColumns[c] != LayerMetric::kGradNorm
                                 ? std::string("-")
                                 : format_value(value);
    if (bad || (kValueColumns[c] == LayerMetric::kGradNonfinite && value > 0)) {
      ImGui::TextColored(ImVec4(1, 0.3f, 0.3f, 1), "%s", text.c_str());
    } else {
      ImGui::TextUnformatted(text.c_str());
    }
  }
  ImGui::TableSetColumnIndex(kValueCount + 1);
  sparkline(run.layer_series(size_t(layer), LayerMetric::kGradNorm), state,
            ImVec2(std::max(font * 3, ImGui::GetContentRegionAvail().x), font));
  order_.push_back(layer);
}

void LayerList::draw(const RunModel& run, AppState& state) {
  filter_.Draw("filter", ImGui::GetFontSize() * 12);
  order_.clear();
  const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY |
                                ImGuiTableFlags_Resizable | ImGuiTableFlags_Sortable |
                                ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_SizingFixedFit;
  if (!ImGui::BeginTable("layers", kValueCount + 2, flags | ImGuiTableFlags_Hideable)) return;
  ImGui::TableSetupScrollFreeze(1, 1);
  ImGui::TableSetupColumn("layer", ImGuiTableColumnFlags_WidthStretch | ImGuiTableColumnFlags_DefaultSort |
                                       ImGuiTableColumnFlags_NoHide,
                          2.0f);
  for (int c = 0; c < kValueCount; ++c) {
    // Wide enough for its header and the sort arrow: "non-finite" was cut to "non-fi...".
    const float width = std::max(ImGui::GetFontSize() * 4.2f, ImGui::CalcTextSize(style_of(kValueColumns[c]).column).x + ImGui::GetFontSize() * 1.2f);
    // At the default width the names had 30 px ("wei", "bia"): absmax and the zero fraction
    // start hidden (a right click on the header shows them; the heatmap and the detail pane
    // plot both).
    const bool hidden = kValueColumns[c] == LayerMetric::kGradAbsmax || kValueColumns[c] == LayerMetric::kGradZeroFrac;
    ImGui::TableSetupColumn(style_of(kValueColumns[c]).column,
                            ImGuiTableColumnFlags_PreferSortDescending | ImGuiTableColumnFlags_WidthFixed |
                                (hidden ? ImGuiTableColumnFlags_DefaultHide : 0),
                            width);
  }
  ImGui::TableSetupColumn("trend", ImGuiTableColumnFlags_WidthFixed | ImGuiTableColumnFlags_NoSort,
                          ImGui::GetFontSize() * 4);
  ImGui::TableHeadersRow();
  // Module paths nest four or five deep; full indentation would leave no room for names.
  ImGui::PushStyleVar(ImGuiStyleVar_IndentSpacing, ImGui::GetFontSize() * 0.7f);

  std::vector<int> layers;
  for (size_t i = 0; i < run.layer_count(); ++i) {
    if (filter_.PassFilter(run.layer_name(i).c_str())) layers.push_back(int(i));
  }
  int sort_column = 0;
  bool ascending = true;
  if (const ImGuiTableSortSpecs* specs = ImGui::TableGetSortSpecs(); specs && specs->SpecsCount > 0) {
    sort_column = specs->Specs[0].ColumnIndex;
    ascending = specs->Specs[0].SortDirection == ImGuiSortDirection_Ascending;
  }

  if (sort_column > 0 || filter_.IsActive() || !ascending) {
    if (sort_column > 0) {
      const LayerMetric metric = kValueColumns[sort_column - 1];
      std::stable_sort(layers.begin(), layers.end(),
                       [&](int a, int b) { return less_by(run, metric, ascending, a, b); });
    } else if (!ascending) {
      std::reverse(layers.begin(), layers.end());
    }
    // Rows that all share a start ("blocks." for a filter of "mlp") show what differs.
    std::vector<std::string> names;
    names.reserve(layers.size());
    for (int layer : layers) names.push_back(run.layer_name(size_t(layer)));
    const size_t shared = shared_leading_parts(names);
    for (size_t i = 0; i < layers.size(); ++i) draw_row(run, state, layers[i], names[i], shared);
  } else {
    // Tree by module path: `open` holds the path components of the nodes now pushed, and
    // whether each is expanded; leaves under a collapsed node are skipped.
    std::vector<std::pair<std::string, bool>> open;
    for (int layer : layers) {
      const std::vector<std::string> parts = dotted_parts(run.layer_name(size_t(layer)));
      const size_t nodes = parts.size() - leaf_parts(parts);
      size_t common = 0;
      while (common < open.size() && common < nodes && open[common].first == parts[common]) {
        ++common;
      }
      while (open.size() > common) {
        if (open.back().second) ImGui::TreePop();
        open.pop_back();
      }
      bool visible = open.empty() || open.back().second;
      for (size_t i = common; i < nodes; ++i) {
        bool expanded = false;
        if (visible) {
          ImGui::TableNextRow();
          ImGui::TableSetColumnIndex(0);
          expanded = ImGui::TreeNodeEx(parts[i].c_str(), ImGuiTreeNodeFlags_DefaultOpen |
                                                             ImGuiTreeNodeFlags_SpanFullWidth);
        }
        open.emplace_back(parts[i], expanded);
        visible = expanded;
      }
      if (visible) {
        std::string leaf = parts[nodes];
        for (size_t i = nodes + 1; i < parts.size(); ++i) leaf += "." + parts[i];
        draw_row(run, state, layer, leaf, 0);
      }
    }
    while (!open.empty()) {
      if (open.back().second) ImGui::TreePop();
      open.pop_back();
    }
  }
  ImGui::PopStyleVar();
  ImGui::EndTable();
}

}  // namespace keel::app::ui
