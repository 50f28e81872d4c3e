// The whole dashboard on a mixture of experts' 6,000 tensors, built without a window by
// keel-bench-app's harness: it opens folded (embed.weight, blocks, head.weight in the heatmap),
// a click on the folded module's heatmap row opens it for the layer list too (one fold state),
// and the first non-finite, inside a folded expert, opens the modules down to its own row. The
// heatmap's "keel: heatmap ... rows R folded F" line says what its rows are.
#include <cfloat>
#include <cstdio>
#include <limits>
#include <string>
#include <variant>

#include <gtest/gtest.h>
#include <imgui.h>

#include "../e2e/heatmap_geometry.hpp"
#include "app_bench_data.hpp"
#include "app_bench_frame.hpp"
#include "model/model.hpp"
#include "ui/dashboard.hpp"
#include "ui/verbose_log.hpp"
#include "values/frame_input.hpp"

namespace keel::bench {
namespace {

constexpr int kLayers = 6000;

// The last "keel: heatmap" line of `log`.
e2e::HeatmapGeometry last_geometry(const std::string& log) {
  e2e::HeatmapGeometry g;
  const size_t at = log.rfind("keel: heatmap");
  EXPECT_NE(at, std::string::npos) << log;
  if (at != std::string::npos) {
    EXPECT_TRUE(e2e::parse_geometry(log.substr(at, log.find('\n', at) - at), g));
  }
  return g;
}

class DashboardFold : public ::testing::Test {
 protected:
  void SetUp() override {
    model_.ingest(run_.description());
    wire::Message message = wire::StepRecord{};
    for (int64_t step = 0; step < 30; ++step) {
      run_.fill(step, std::get<wire::StepRecord>(message));
      model_.ingest(message);
    }
    app::EndpointState link;
    link.endpoint = "synthetic";
    link.state = app::LinkState::kLive;
    input_.links = {link};
    app::ui::set_verbose_log(true);
  }
  void TearDown() override { app::ui::set_verbose_log(false); }

  // Frames of the dashboard, returning what they logged.
  std::string frames(int count) {
    testing::internal::CaptureStdout();
    for (int i = 0; i < count; ++i) ui_.frame([&] { dashboard_.draw(model_, input_); });
    return testing::internal::GetCapturedStdout();
  }

  HeadlessUi ui_{1600, 1000};
  SyntheticRun run_{kLayers, 1};
  app::Model model_;
  app::ui::Dashboard dashboard_;
  app::FrameInput input_;
};

TEST_F(DashboardFold, AClickOnAFoldedModulesHeatmapRowOpensItEverywhere) {
  ImGui::GetIO().MousePos = ImVec2(-FLT_MAX, -FLT_MAX);
  const e2e::HeatmapGeometry folded = last_geometry(frames(3));
  EXPECT_EQ(folded.layers, kLayers);
  ASSERT_EQ(folded.rows, 3) << "embed.weight, blocks, head.weight";
  EXPECT_EQ(folded.folded, 1);

  // Press and release on the middle of row 1, blocks.
  ImGuiIO& io = ImGui::GetIO();
  io.MousePos = ImVec2((folded.x0 + folded.x1) / 2, folded.y0 + folded.row * 1.5f);
  frames(1);
  io.MouseDown[0] = true;
  frames(1);
  io.MouseDown[0] = false;
  const std::string log = frames(1);
  io.MousePos = ImVec2(-FLT_MAX, -FLT_MAX);
  EXPECT_NE(log.find("keel: module blocks opened"), std::string::npos) << log;
  EXPECT_TRUE(dashboard_.state().module_open("blocks", false)) << "the state the layer list reads too";
  const e2e::HeatmapGeometry opened = last_geometry(frames(2));
  // 5,998 tensors of 773 a block: 8 blocks, each folded.
  EXPECT_EQ(opened.rows, 10);
  EXPECT_EQ(opened.folded, 8);
}

TEST_F(DashboardFold, TheFirstNonfiniteOpensTheModulesDownToItsLayer) {
  const std::string layer = run_.layer_name(3000);
  ASSERT_NE(layer.find(".experts."), std::string::npos) << layer;
  wire::Event event;
  event.step = 29;
  event.seq = 1000;
  event.kind = app::RunModel::kFirstNonfiniteKind;
  event.layer = layer;
  model_.ingest(wire::Message(event));
  const std::string log = frames(3);
  EXPECT_NE(log.find("keel: selected layer " + layer), std::string::npos) << log;
  EXPECT_NE(log.find("keel: module blocks opened"), std::string::npos) << log;
  const std::string expert = layer.substr(0, layer.rfind('.', layer.rfind('.') - 1));
  EXPECT_NE(log.find("keel: module " + expert + " opened"), std::string::npos) << expert << "\n" << log;
  const e2e::HeatmapGeometry g = last_geometry(log);
  EXPECT_GT(g.rows, 3);
  EXPECT_LT(g.rows, 400) << "only the modules holding the layer opened";
}

}  // namespace
}  // namespace keel::bench
