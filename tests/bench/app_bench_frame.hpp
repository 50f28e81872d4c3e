// Frame building without a window: the dashboard's real views on a Dear ImGui context that has
// no platform backend and no renderer.
//
// What it is for: the UI thread's CPU cost of one frame, from ImGui::NewFrame() to
// ImGui::Render(), which is everything the app does per frame except ingest and the GL draw
// (the draw list is built, never submitted). Two scenes, both with follow-live on and the
// whole history in view:
//   - the scene: the layer heatmap (every layer) above three step plots (loss, global
//     grad norm, one layer's grad norm), in one 1600 x 1000 window;
//   - the app's whole dashboard (status bar, four global charts, heatmap, five layer-detail
//     plots of a selected layer, the 1,000-row layer list with sparklines, events), zoomed out
//     the way a user does it: one mouse-wheel turn over the heatmap.
// Threads: the thread that created the HeadlessUi, for every call (ImGui's context is global).
// Never: opens a window, needs a display, or touches GL.
#pragma once

#include <cstdint>
#include <functional>

#include "model/model.hpp"

namespace keel::bench {

// Owns the global ImGui context for its lifetime; one at a time.
class HeadlessUi {
 public:
  HeadlessUi(float width_px, float height_px);
  HeadlessUi(const HeadlessUi&) = delete;
  HeadlessUi& operator=(const HeadlessUi&) = delete;
  ~HeadlessUi();

  // Builds one frame: NewFrame, draw(), Render. Returns the calling thread's CPU time for the
  // whole of it, in milliseconds.
  double frame(const std::function<void()>& draw);
  // Vertices in the last frame's draw data: what the GL draw would have uploaded.
  int64_t last_vertices() const;
};

struct FrameTiming {
  int frames = 0;             // measured frames (after warm-up)
  double cpu_ms_median = 0;   // thread CPU time, NewFrame to Render
  double cpu_ms_p90 = 0;
  double wall_ms_median = 0;  // the same frames by the wall clock
  int64_t vertices = 0;       // draw data of the last frame
  double view_first = 0;      // the step range the plots showed
  double view_last = 0;
  // The model's share of the heatmap: RunModel::heatmap() for every layer over the same step
  // range, alone (no colouring, no drawing), thread CPU time, median. Views scene only.
  double heatmap_query_ms = 0;
  int heatmap_query_columns = 0;
};

// The heatmap and three plots over the shown run's whole history.
FrameTiming time_views_frame(HeadlessUi& ui, const app::Model& model, int frames);
// The whole dashboard over the shown run's whole history. Returns frames = 0 when the wheel
// could not bring the whole history into view (the layout changed): no number beats a wrong one.
// `before_each`, when given, runs before each measured frame, untimed (a new step ingested:
// the frame that has to redraw for it).
FrameTiming time_dashboard_frame(HeadlessUi& ui, const app::Model& model, int frames,
                                 const std::function<void()>& before_each = {});

}  // namespace keel::bench
