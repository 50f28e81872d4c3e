// The whole dashboard of a 1,000-layer run, built without a window by keel-bench-app's own
// harness, stays under 65,536 vertices: the size Dear ImGui's 16-bit indices can draw when the
// renderer cannot offset vertices (window.cpp's OpenGL 3.0 fallback context, where Debian's
// libimgui asserts past it). Rows of the layer list scrolled out of view draw nothing; before
// they were culled this frame had about 540,000 vertices. A 50,000-tensor run, its modules
// folded, stays under it too.
#include <variant>

#include <gtest/gtest.h>

#include "app_bench_data.hpp"
#include "app_bench_frame.hpp"
#include "model/model.hpp"

namespace keel::bench {
namespace {

TEST(DashboardVertices, AThousandLayerRunFitsSixteenBitIndices) {
  HeadlessUi ui(1600, 1000);
  SyntheticRun run(1000, 1);
  app::Model model;
  model.ingest(run.description());
  wire::Message message = wire::StepRecord{};
  for (int64_t step = 0; step < 2000; ++step) {
    run.fill(step, std::get<wire::StepRecord>(message));
    model.ingest(message);
  }
  const FrameTiming dashboard = time_dashboard_frame(ui, model, 2);
  ASSERT_GT(dashboard.frames, 0) << "the harness could not bring the history into view";
  EXPECT_GT(dashboard.vertices, 10000) << "the frame drew next to nothing";
  EXPECT_LT(dashboard.vertices, 65536);
}

// A mixture of experts' 50,000 tensors: the modules fold (the list and the heatmap draw a
// few hundred rows however many tensors), so the frame stays inside the same budget.
TEST(DashboardVertices, AFiftyThousandTensorRunFitsSixteenBitIndices) {
  HeadlessUi ui(1600, 1000);
  SyntheticRun run(50000, 1);
  app::Model model;
  model.ingest(run.description());
  wire::Message message = wire::StepRecord{};
  for (int64_t step = 0; step < 20; ++step) {
    run.fill(step, std::get<wire::StepRecord>(message));
    model.ingest(message);
  }
  const FrameTiming dashboard = time_dashboard_frame(ui, model, 2);
  ASSERT_GT(dashboard.frames, 0) << "the harness could not bring the history into view";
  EXPECT_GT(dashboard.vertices, 10000) << "the frame drew next to nothing";
  EXPECT_LT(dashboard.vertices, 65536);
}

}  // namespace
}  // namespace keel::bench
