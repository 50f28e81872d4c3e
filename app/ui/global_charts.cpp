#include "ui/global_charts.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <string>
#include <vector>

#include <imgui.h>

#include "ui/distinct_labels.hpp"
#include "ui/fonts.hpp"
#include "ui/abandoned_series.hpp"
#include "ui/plot.hpp"

namespace keel::app::ui {
namespace {

constexpr ImU32 kLossColour = IM_COL32(90, 170, 255, 255);
constexpr ImU32 kNormColour = IM_COL32(120, 220, 140, 255);
constexpr ImU32 kScaleColour = IM_COL32(230, 200, 90, 255);
constexpr ImU32 kAbsmaxColour = IM_COL32(240, 120, 90, 255);
constexpr ImU32 kZColour = IM_COL32(200, 140, 255, 255);
constexpr ImU32 kJobColour = IM_COL32(235, 235, 235, 255);
// The losses of the other runs on the shown run's rank, in turn.
constexpr std::array<ImU32, 4> kOtherRunColours = {IM_COL32(110, 230, 230, 255), IM_COL32(255, 170, 60, 255),
                                                   IM_COL32(230, 110, 200, 255), IM_COL32(200, 200, 110, 255)};

// A run's line in an overlaid loss chart: its model, else its run id.
std::string loss_label(const RunModel& run) {
  if (!run.model().empty()) return run.model();
  return run.run_id().empty() ? std::string("(attached mid-run)") : run.run_id();
}

// The legend labels of runs overlaid in a chart `cell_w` pixels wide titled `title`: the parts
// of their names that differ, each short enough that all of them (and "buffers", when
// `buffers`) fit beside the title. The labels are the same in both charts.
std::vector<std::string> legend_labels(const std::vector<std::string>& names, float cell_w, const char* title,
                                       bool buffers) {
  if (names.size() < 2) return names;
  const float font = ImGui::GetFontSize();
  const float gap = font * 0.8f;   // plot_series' space before each legend entry
  // begin_plot's plot area: 4.2 font widths of y labels on the left, half of one on the right.
  float room = cell_w - font * 4.7f - ImGui::CalcTextSize(title).x - font;
  if (buffers) room -= ImGui::CalcTextSize("buffers").x + gap;
  const float each = std::max(font * 3.0f, room / float(names.size()) - gap);
  return short_distinct_labels(names, each, [](const std::string& text) { return ImGui::CalcTextSize(text.c_str()).x; },
                               ellipsis());
}

// The chart plots param group 0's lr; with several groups the title names each group's.
std::string lr_title(const std::vector<double>& group_lrs) {
  if (group_lrs.empty()) return "learning rate";
  std::string title = "learning rate of group 0; groups now:";
  char value[32];
  for (size_t g = 0; g < group_lrs.size() && g < 8; ++g) {
    std::snprintf(value, sizeof value, " %zu: %.3g", g, group_lrs[g]);
    title += value;
  }
  if (group_lrs.size() > 8) title += " ...";
  return title;
}

}  // namespace

void draw_global_charts(const RunModel& run, const std::vector<const RunModel*>& others,
                        const SeriesHistory* job_norm, int32_t job_ranks, AppState& state) {
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float spacing = ImGui::GetStyle().ItemSpacing.x;
  const ImVec2 cell((avail.x - spacing) * 0.5f, (avail.y - ImGui::GetStyle().ItemSpacing.y) * 0.5f);
  const SeriesHistory* skipped = &run.global_series(GlobalSeries::kSkipped);

  const SeriesHistory& buffers = run.global_series(GlobalSeries::kBufferAbsmax);
  const char* loss_title = others.empty() ? "loss" : "loss of each run";
  const char* norm_title = others.empty() ? (buffers.empty() ? "global grad norm" : "global grad norm; buffers' max |b|")
                                          : "global grad norm of each run";
  // A sharded rank's own norm is of its shards alone; the job's is all ranks' combined.
  char own_label[32], job_label[32];
  if (job_norm != nullptr) {
    norm_title = "grad norm (sharded)";
    std::snprintf(own_label, sizeof own_label, "rank %d", run.rank());
    std::snprintf(job_label, sizeof job_label, "job (%d ranks)", job_ranks);
  }
  // Each run's loss under its name, once there are several; the labels outlive the call.
  std::vector<std::string> names{others.empty() ? std::string("loss") : loss_label(run)};
  for (const RunModel* other : others) names.push_back(loss_label(*other));
  const std::vector<std::string> labels = legend_labels(names, cell.x, norm_title, !buffers.empty());
  // The whole name goes in the legend's tooltip where it was shortened.
  const auto full = [&](size_t i) { return labels[i] == names[i] ? nullptr : names[i].c_str(); };
  std::vector<SeriesSpec> losses{
      {&run.global_series(GlobalSeries::kLoss), labels[0].c_str(), kLossColour, nullptr, full(0)}};
  for (size_t i = 0; i < others.size(); ++i) {
    losses.push_back({&others[i]->global_series(GlobalSeries::kLoss), labels[i + 1].c_str(),
                      kOtherRunColours[i % kOtherRunColours.size()], &others[i]->global_series(GlobalSeries::kSkipped),
                      full(i + 1)});
  }
  losses[0].abandoned = abandoned_global_series(run, GlobalSeries::kLoss);
  plot_series(loss_title, cell, losses, false, state, skipped);
  ImGui::SameLine();
  // The global grad norm the same way: each run's under its name, in the loss chart's colours,
  // so two runs compared (yesterday's and today's with the fix) line up on one step axis.
  std::vector<SeriesSpec> norms{{&run.global_series(GlobalSeries::kGradNorm),
                                 others.empty() ? (job_norm ? own_label : "grad norm") : labels[0].c_str(), kNormColour,
                                 nullptr, others.empty() ? nullptr : full(0)}};
  norms[0].abandoned = abandoned_global_series(run, GlobalSeries::kGradNorm);
  if (job_norm != nullptr) norms.push_back({job_norm, job_label, kJobColour});
  for (size_t i = 0; i < others.size(); ++i) {
    norms.push_back({&others[i]->global_series(GlobalSeries::kGradNorm), labels[i + 1].c_str(),
                     kOtherRunColours[i % kOtherRunColours.size()], &others[i]->global_series(GlobalSeries::kSkipped),
                     full(i + 1)});
  }
  if (!buffers.empty()) norms.push_back({&buffers, "buffers", kAbsmaxColour});
  plot_series(norm_title, cell, norms, true, state, skipped);

  // A run without a loss scaler has no loss-scale samples; show the step time instead of an
  // empty chart, so the slot still says something about the run.
  const SeriesHistory& scale = run.global_series(GlobalSeries::kLossScale);
  if (!scale.empty()) {
    SeriesSpec spec{&scale, "scale", kScaleColour};
    spec.abandoned = abandoned_global_series(run, GlobalSeries::kLossScale);
    plot_series("loss scale (skipped steps marked)", cell, {spec}, true, state, skipped);
  } else {
    std::vector<SeriesSpec> times{{&run.global_series(GlobalSeries::kStepTimeUs), "step us", kScaleColour},
                                  {&run.global_series(GlobalSeries::kProbeUs), "probe us", kLossColour}};
    times[0].abandoned = abandoned_global_series(run, GlobalSeries::kStepTimeUs);
    plot_series("step time, us (skipped steps marked)", cell, times, true, state, skipped);
  }
  ImGui::SameLine();
  if (run.watch_count() > 0) {
    const std::string title = run.watch_name(0) + ": absmax and z";
    plot_series(title.c_str(), cell,
                {{&run.watch_series(0, WatchMetric::kAbsmax), "absmax", kAbsmaxColour},
                 {&run.watch_series(0, WatchMetric::kZ), "z", kZColour}},
                false, state, skipped);
  } else {
    SeriesSpec lr{&run.global_series(GlobalSeries::kLr), "lr", kScaleColour};
    lr.abandoned = abandoned_global_series(run, GlobalSeries::kLr);
    plot_series(lr_title(run.latest_step().group_lrs).c_str(), cell, {lr}, false, state, skipped);
  }
}

}  // namespace keel::app::ui
