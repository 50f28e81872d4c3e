// Headless frame building behind keel-bench-app; see app_bench_frame.hpp.

#include "app_bench_frame.hpp"

#include <cfloat>
#include <chrono>
#include <cmath>
#include <ctime>
#include <string>
#include <vector>

#include <imgui.h>

#include "app_bench_stats.hpp"
#include "model/column_grid.hpp"
#include "ui/app_state.hpp"
#include "ui/dashboard.hpp"
#include "ui/fonts.hpp"
#include "ui/heatmap_view.hpp"
#include "ui/plot.hpp"
#include "values/frame_input.hpp"

namespace keel::bench {
namespace {

using app::ui::AppState;

// Frames before measuring: the first ones lay out windows and grow every per-view buffer.
constexpr int kWarmupFrames = 3;
// The heatmap's width in pixel columns in the views scene (its "keel: heatmap" geometry line:
// x1 - x0 with the vertical scrollbar shown), for timing the model query on its own.
constexpr int kHeatmapColumns = 1366;
// The app's fixed 60 Hz assumption is irrelevant here: DeltaTime only drives ImGui's own
// animations (none in these views), but it must be positive.
constexpr float kFrameDeltaSecs = 1.0f / 60.0f;

double thread_cpu_ms() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return double(now.tv_sec) * 1e3 + double(now.tv_nsec) * 1e-6;
}

// Steps the view must span so that a follow-live view shows [first, last] entirely.
double history_span(const app::RunModel& run) {
  return double(run.last_step() - run.first_step() + 1);
}

// Runs warm-up frames, then `frames` measured ones, of `draw`; `before_each` (untimed) before
// each measured one.
FrameTiming measure(HeadlessUi& ui, int frames, const std::function<void()>& draw,
                    const std::function<void()>& before_each = {}) {
  std::vector<double> cpu_ms, wall_ms;
  for (int i = 0; i < kWarmupFrames + frames; ++i) {
    if (i >= kWarmupFrames && before_each) before_each();
    const auto start = std::chrono::steady_clock::now();
    const double cpu = ui.frame(draw);
    const double wall =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (i < kWarmupFrames) continue;
    cpu_ms.push_back(cpu);
    wall_ms.push_back(wall);
  }
  FrameTiming timing;
  timing.frames = frames;
  timing.cpu_ms_median = percentile(cpu_ms, 0.5);
  timing.cpu_ms_p90 = percentile(cpu_ms, 0.9);
  timing.wall_ms_median = percentile(wall_ms, 0.5);
  timing.vertices = ui.last_vertices();
  return timing;
}

// The scene, built from the same views and plot helper the dashboard uses.
void draw_views(const app::RunModel& run, AppState& state, app::ui::HeatmapView& heatmap,
                size_t plotted_layer, const std::string& layer_title) {
  constexpr ImU32 kLossColour = IM_COL32(90, 170, 255, 255);
  constexpr ImU32 kNormColour = IM_COL32(120, 220, 140, 255);
  state.begin_frame(run.first_step(), run.last_step());
  const ImGuiViewport* viewport = ImGui::GetMainViewport();
  ImGui::SetNextWindowPos(viewport->WorkPos);
  ImGui::SetNextWindowSize(viewport->WorkSize);
  ImGui::Begin("views", nullptr, ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoSavedSettings);
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  if (ImGui::BeginChild("heatmap", ImVec2(avail.x, std::floor(avail.y * 0.6f)), true,
                        ImGuiWindowFlags_NoScrollWithMouse)) {
    heatmap.draw(run, state);
  }
  ImGui::EndChild();
  const float spacing = ImGui::GetStyle().ItemSpacing.x;
  const ImVec2 cell((avail.x - 2 * spacing) / 3, ImGui::GetContentRegionAvail().y);
  const app::SeriesHistory* skipped = &run.global_series(app::GlobalSeries::kSkipped);
  app::ui::plot_series("loss", cell, {{&run.global_series(app::GlobalSeries::kLoss), "loss", kLossColour}},
                       false, state, skipped);
  ImGui::SameLine();
  app::ui::plot_series("global grad norm", cell,
                       {{&run.global_series(app::GlobalSeries::kGradNorm), "grad norm", kNormColour}},
                       true, state, skipped);
  ImGui::SameLine();
  app::ui::plot_series(layer_title.c_str(), cell,
                       {{&run.layer_series(plotted_layer, wire::LayerMetric::kGradNorm), "grad norm",
                         kNormColour}},
                       true, state, skipped);
  ImGui::End();
}

}  // namespace

HeadlessUi::HeadlessUi(float width_px, float height_px) {
  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGuiIO& io = ImGui::GetIO();
  io.IniFilename = nullptr;
  io.LogFilename = nullptr;
  io.DisplaySize = ImVec2(width_px, height_px);
  io.DeltaTime = kFrameDeltaSecs;
  // What the app's renderer (imgui_impl_opengl3 on a GL >= 3.2 context) declares: a draw list
  // may pass 65,536 vertices. A 1,000-row heatmap does; without the flag ImGui asserts.
  io.BackendFlags |= ImGuiBackendFlags_RendererHasVtxOffset;
  ImGui::StyleColorsDark();
  // The app's own font (DejaVu Sans when installed) at scale 1: text layout cost depends on it.
  app::ui::load_fonts(1.0f);
  // NewFrame() requires a built atlas; the texture id is never dereferenced without a renderer.
  unsigned char* pixels = nullptr;
  int atlas_w = 0, atlas_h = 0;
  io.Fonts->GetTexDataAsRGBA32(&pixels, &atlas_w, &atlas_h);
  io.Fonts->SetTexID(reinterpret_cast<ImTextureID>(intptr_t{1}));
}

HeadlessUi::~HeadlessUi() { ImGui::DestroyContext(); }

double HeadlessUi::frame(const std::function<void()>& draw) {
  const double start = thread_cpu_ms();
  ImGui::GetIO().DeltaTime = kFrameDeltaSecs;
  ImGui::NewFrame();
  draw();
  ImGui::Render();
  return thread_cpu_ms() - start;
}

int64_t HeadlessUi::last_vertices() const {
  const ImDrawData* data = ImGui::GetDrawData();
  return data && data->Valid ? data->TotalVtxCount : 0;
}

FrameTiming time_views_frame(HeadlessUi& ui, const app::Model& model, int frames) {
  const app::RunModel* run = app::ui::Dashboard::shown_run(model);
  if (!run || !run->has_steps()) return {};
  AppState state;
  app::ui::HeatmapView heatmap;
  // Follow-live, zoomed out around the newest step until the view spans the whole history.
  state.begin_frame(run->first_step(), run->last_step());
  state.zoom(history_span(*run) / AppState::kDefaultSpanSteps, double(run->last_step()));
  const size_t layer = run->layer_count() / 2;
  const std::string title = "grad norm: " + run->layer_name(layer);
  FrameTiming timing =
      measure(ui, frames, [&] { draw_views(*run, state, heatmap, layer, title); });
  timing.view_first = state.view_first();
  timing.view_last = state.view_last();

  const app::ColumnGrid grid(int64_t(std::floor(state.view_first())), int64_t(std::ceil(state.view_last())),
                             kHeatmapColumns);
  std::vector<app::Summary> cells;
  std::vector<double> query_ms;
  for (int i = 0; i < kWarmupFrames + frames; ++i) {
    const double start = thread_cpu_ms();
    run->heatmap(wire::LayerMetric::kGradNorm, 0, run->layer_count(), grid, cells);
    if (i >= kWarmupFrames) query_ms.push_back(thread_cpu_ms() - start);
  }
  timing.heatmap_query_ms = percentile(query_ms, 0.5);
  timing.heatmap_query_columns = grid.columns();
  if (!state.follow_live() || state.view_first() > double(run->first_step()) + 0.5) timing.frames = 0;
  return timing;
}

FrameTiming time_dashboard_frame(HeadlessUi& ui, const app::Model& model, int frames,
                                 const std::function<void()>& before_each) {
  const app::RunModel* run = app::ui::Dashboard::shown_run(model);
  if (!run || !run->has_steps()) return {};
  app::ui::Dashboard dashboard;
  // A selected layer, so the layer-detail pane draws its five plots as it does in use.
  dashboard.request_select(run->layer_name(run->layer_count() / 2));
  app::EndpointState link;
  link.endpoint = "synthetic";
  link.state = app::LinkState::kLive;
  link.messages = run->counters().messages;
  link.secs_since_message = 0.1;
  app::FrameInput input;
  input.links = {link};
  const auto draw = [&] { dashboard.draw(model, input); };

  ImGuiIO& io = ImGui::GetIO();
  const ImVec2 away(-FLT_MAX, -FLT_MAX);
  io.MousePos = away;
  ui.frame(draw);
  ui.frame(draw);
  // One wheel turn zooms by 0.85 per notch around the mouse (plot.cpp); a fractional turn gives
  // exactly the whole history. Where the heatmap is depends on the pane layout, so points
  // down the left column are tried until one lands on a step plot (any will do: they share the
  // view).
  const double notches = -std::log(history_span(*run) / AppState::kDefaultSpanSteps) / std::log(1 / 0.85);
  const auto whole_history = [&] {
    const AppState& state = dashboard.state();
    return state.follow_live() && state.view_first() <= double(run->first_step()) + 0.5;
  };
  for (float y = 100; y < io.DisplaySize.y && !whole_history(); y += 50) {
    io.MousePos = ImVec2(io.DisplaySize.x * 0.4f, y);
    io.MouseWheel = float(notches);
    ui.frame(draw);
    io.MouseWheel = 0;
    io.MousePos = away;
    // A hover leaves the shared cursor set for one frame; let it clear before measuring.
    ui.frame(draw);
  }
  if (!whole_history()) return {};
  FrameTiming timing = measure(ui, frames, draw, before_each);
  timing.view_first = dashboard.state().view_first();
  timing.view_last = dashboard.state().view_last();
  return timing;
}

}  // namespace keel::bench
