#include "ui/layer_detail.hpp"

#include <algorithm>
#include <cstdio>
#include <string>

#include <imgui.h>

#include "model/first_cause.hpp"
#include "ui/metric_styles.hpp"
#include "ui/plot.hpp"
#include "ui/verbose_log.hpp"

namespace keel::app::ui {
namespace {

// The plots, in the order they are laid out (the non-finite count is the list's column and the
// heatmap's red, not a plot of its own).
constexpr wire::LayerMetric kPlots[] = {wire::LayerMetric::kGradNorm, wire::LayerMetric::kGradAbsmax,
                                        wire::LayerMetric::kUpdateRatio, wire::LayerMetric::kParamNorm,
                                        wire::LayerMetric::kGradZeroFrac};

}  // namespace

void LayerDetail::log_geometry(const std::string& layer) {
  const ImVec2 min = ImGui::GetWindowPos(), size = ImGui::GetWindowSize();
  char text[512];
  std::snprintf(text, sizeof text, "keel: detail %s x0 %.0f y0 %.0f x1 %.0f y1 %.0f", layer.c_str(), min.x, min.y,
                min.x + size.x, min.y + size.y);
  if (logged_geometry_ == text) return;
  logged_geometry_ = text;
  verbose_log("%s", text);
}

void LayerDetail::draw(const RunModel& run, AppState& state) {
  const int layer = state.selected_layer();
  if (layer < 0 || size_t(layer) >= run.layer_count()) {
    ImGui::TextDisabled("select a layer (heatmap, list or events; up/down keys)");
    return;
  }
  ImGui::Text("%s", run.layer_name(size_t(layer)).c_str());
  log_geometry(run.layer_name(size_t(layer)));
  ImGui::SameLine();
  if (const GradientState gradient = run.gradient_state(size_t(layer)); gradient != GradientState::kMeasured) {
    ImGui::TextColored(ImVec4(0.47f, 0.55f, 0.67f, 1.0f), "%s;", gradient_state_reason(gradient));
    ImGui::SameLine();
  }
  ImGui::TextDisabled("%s  (space: follow live, Home: reset view, wheel: zoom, drag: pan)",
                      state.follow_live() ? "following live" : "paused on the past");
  // The run's first unsafe step was born here: say why, where the layer's history is read.
  if (const std::optional<wire::Event>& first = run.first_nonfinite();
      first && cause_is_about(*first, run.layer_name(size_t(layer)))) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1.0f, 0.35f, 0.35f, 1.0f));
    ImGui::TextWrapped("%s", cause_sentence(*first).c_str());
    ImGui::PopStyleColor();
  }

  // Three plots a row, two rows.
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const ImGuiStyle& style = ImGui::GetStyle();
  const ImVec2 cell((avail.x - style.ItemSpacing.x * 2) / 3,
                    std::max(ImGui::GetFontSize() * 5, (avail.y - style.ItemSpacing.y) / 2));
  const SeriesHistory* skipped = &run.global_series(GlobalSeries::kSkipped);
  int index = 0;
  for (const wire::LayerMetric metric : kPlots) {
    if (index % 3 != 0) ImGui::SameLine();
    const char* title = wire::info_of(metric).label;
    const MetricStyle& style = style_of(metric);
    plot_series(title, cell, {{&run.layer_series(size_t(layer), metric), title, style.colour}}, style.log_y, state,
                skipped);
    ++index;
  }
}

}  // namespace keel::app::ui
