#include "ui/layer_detail.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include <imgui.h>

#include "model/first_cause.hpp"
#include "ui/instability_focus.hpp"
#include "ui/metric_styles.hpp"
#include "ui/abandoned_series.hpp"
#include "ui/plot.hpp"
#include "ui/verbose_log.hpp"

namespace keel::app::ui {
void LayerDetail::log_geometry(const std::string& layer) {
  const ImVec2 min = ImGui::GetWindowPos(), size = ImGui::GetWindowSize();
  char text[512];
  std::snprintf(text, sizeof text, "keel: detail %s x0 %.0f y0 %.0f x1 %.0f y1 %.0f", layer.c_str(), min.x, min.y,
                min.x + size.x, min.y + size.y);
  if (logged_geometry_ == text) return;
  logged_geometry_ = text;
  verbose_log("%s", text);
}

void LayerDetail::draw_summary(const RunModel& run) {
  const std::string label = run.model().empty() ? run.run_id() : run.model() + " (" + run.run_id() + ")";
  if (!run.has_steps()) {
    ImGui::TextDisabled("run %s rank %d: no steps yet", label.c_str(), run.rank());
    return;
  }
  const LatestStep& latest = run.latest_step();
  ImGui::Text("run %s rank %d: steps %lld..%lld held, loss %s, grad norm %s", label.c_str(), run.rank(),
              static_cast<long long>(run.first_step()), static_cast<long long>(latest.step),
              format_value(latest.loss).c_str(), format_value(latest.grad_norm).c_str());
  if (const std::optional<wire::Event>& first = run.first_nonfinite()) {
    ImGui::SameLine();
    ImGui::TextColored(ImVec4(1.0f, 0.35f, 0.35f, 1.0f), "first non-finite: step %lld%s%s (F goes there)",
                       static_cast<long long>(first->step), first->layer.empty() ? "" : " in ",
                       first->layer.c_str());
  } else {
    ImGui::SameLine();
    ImGui::TextDisabled("no non-finite step");
  }
}

void LayerDetail::draw(const RunModel& run, AppState& state) {
  int layer = state.selected_layer();
  const bool chosen = layer >= 0 && size_t(layer) < run.layer_count();
  if (!chosen) {
    // Before a click: the run in a line and its loudest layer over the view, not an empty pane.
    draw_summary(run);
    layer = run.has_steps() ? loudest_layer_over(run, int64_t(std::floor(state.view_first())),
                                                 int64_t(std::ceil(state.view_last())))
                            : -1;
    if (layer < 0) {
      ImGui::TextDisabled("select a layer (heatmap, list or events; up/down keys)");
      return;
    }
    ImGui::TextDisabled("loudest in view:");
    ImGui::SameLine();
  }
  ImGui::Text("%s", run.layer_name(size_t(layer)).c_str());
  log_geometry(run.layer_name(size_t(layer)));
  ImGui::SameLine();
  if (const GradientState gradient = run.gradient_state(size_t(layer)); gradient != GradientState::kMeasured) {
    ImGui::TextColored(ImVec4(0.47f, 0.55f, 0.67f, 1.0f), "%s;", gradient_state_reason(gradient));
    ImGui::SameLine();
  }
  // A wide model's layers have values only every few steps: their gaps are the cadence, not loss.
  if (const std::string cadence = layer_cadence(run);
      !cadence.empty() && run.latest_step(size_t(layer), wire::LayerMetric::kGradNorm) < run.last_step()) {
    ImGui::TextDisabled("%s (newest here: step %lld);", cadence.c_str(),
                        static_cast<long long>(run.latest_step(size_t(layer), wire::LayerMetric::kGradNorm)));
    ImGui::SameLine();
  }
  ImGui::TextDisabled("%s  (%sspace: follow live, Home: reset view, F: first non-finite, wheel: zoom, drag: pan)",
                      state.follow_live() ? "following live" : "paused on the past",
                      chosen ? "" : "click a layer to choose; ");
  // The run's first unsafe step was born here: say why, where the layer's history is read.
  if (const std::optional<wire::Event>& first = run.first_nonfinite();
      first && cause_is_about(*first, run.layer_name(size_t(layer)))) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1.0f, 0.35f, 0.35f, 1.0f));
    ImGui::TextWrapped("%s", cause_sentence(*first).c_str());
    ImGui::PopStyleColor();
  }

  // The table's plots in its order (wire::kDetailPlotMetrics), three a row, filling the pane.
  constexpr int kPlotsPerRow = 3;
  constexpr int kPlotRows = (int(wire::kDetailPlotMetrics.size()) + kPlotsPerRow - 1) / kPlotsPerRow;
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const ImGuiStyle& style = ImGui::GetStyle();
  const ImVec2 cell((avail.x - style.ItemSpacing.x * (kPlotsPerRow - 1)) / kPlotsPerRow,
                    std::max(ImGui::GetFontSize() * 5, (avail.y - style.ItemSpacing.y * (kPlotRows - 1)) / kPlotRows));
  const SeriesHistory* skipped = &run.global_series(GlobalSeries::kSkipped);
  int index = 0;
  for (const wire::LayerMetric metric : wire::kDetailPlotMetrics) {
    if (index % kPlotsPerRow != 0) ImGui::SameLine();
    const char* title = wire::info_of(metric).label;
    const MetricStyle& style = style_of(metric);
    SeriesSpec spec{&run.layer_series(size_t(layer), metric), title, style.colour};
    spec.abandoned = abandoned_layer_series(run, size_t(layer), metric);
    // A wide model's layers are sent every few steps: their samples joined, not dotted.
    if (!run.description().modules.empty()) spec.sampled_every = run.layer_detail_every();
    plot_series(title, cell, {spec}, style.log_y, state, skipped);
    ++index;
  }
}

}  // namespace keel::app::ui
