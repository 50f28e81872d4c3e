// A data-parallel job seen by the real dashboard in a real X window (Xvfb): two keel-demo
// processes as ranks 0 and 1 (one endpoint each), a NaN injected on rank 1 only. The ranks x
// layers strip shows the NaN in rank 1's row and nowhere in rank 0's, the dashboard names
// rank 1 as the first to go non-finite, a real click (xdotool) on rank 1's row shows that
// rank in the panes, and one click on Skip skips the same step on both ranks. Run under
// xvfb-run (see CMakeLists.txt).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "child_process.hpp"
#include "ranks_strip.hpp"

#define STB_IMAGE_IMPLEMENTATION
#include <stb_image.h>

namespace {

using keel::e2e::ChildProcess;
using keel::e2e::nonfinite_pixels;
using keel::e2e::parse_ranks_strip;
using keel::e2e::RanksStrip;
using keel::e2e::run_command;

constexpr const char* kNanLayer = "blocks.1.mlp.fc.weight";
constexpr int kNanLayerColumn = 22;  // its index in the demo's named_parameters() order
constexpr int kClickLayerColumn = 10;
constexpr const char* kClickLayer = "blocks.0.mlp.fc.weight";

class RanksGuiTest : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    for (int rank = 0; rank < 2; ++rank) {
      endpoints_[rank] = "tcp://127.0.0.1:" + std::to_string(keel::e2e::free_port_pair());
      std::vector<std::string> argv = {KEEL_DEMO_PATH, "--steps", "0", "--endpoint", endpoints_[rank], "--log-every",
                                       "10", "--pace", "20", "--rank", std::to_string(rank), "--world-size", "2"};
      if (rank == 1) {
        argv.push_back("--inject-nan");
        argv.push_back(std::string("30:") + kNanLayer);
      }
      demos_[rank] = new ChildProcess(argv, keel::e2e::kBackgroundNiceness);
    }
  }
  static void TearDownTestSuite() {
    for (ChildProcess*& demo : demos_) {
      delete demo;
      demo = nullptr;
    }
  }
  static std::vector<std::string> connect_both() {
    return {KEEL_PATH, "--verbose", "--connect", endpoints_[0], "--connect", endpoints_[1]};
  }
  static std::string endpoints_[2];
  static ChildProcess* demos_[2];
};
std::string RanksGuiTest::endpoints_[2];
ChildProcess* RanksGuiTest::demos_[2] = {nullptr, nullptr};

TEST_F(RanksGuiTest, TheStripShowsRankOnesNanAndNamesItFirst) {
  const std::string png = testing::TempDir() + "keel_ranks_gui_test.png";
  std::remove(png.c_str());
  // Rank 1's NaN has happened before the app starts (it exits at its screenshot), however
  // slowly the trainers started; the app shows it from its late-attach backfill.
  ASSERT_FALSE(demos_[1]->wait_for("event first_nonfinite", 120).empty()) << demos_[1]->output();
  std::vector<std::string> argv = connect_both();
  for (const char* arg : {"--screenshot", png.c_str(), "--screenshot-after", "8"}) argv.push_back(arg);
  ChildProcess keel(argv);
  RanksStrip g;
  ASSERT_TRUE(parse_ranks_strip(keel.wait_for("keel: ranks", 60), g)) << keel.output();
  EXPECT_EQ(g.ranks, 2);
  EXPECT_EQ(g.layers, 42);
  const std::string first = keel.find_or_wait_for("keel: first nonfinite", 60);
  EXPECT_NE(first.find(std::string("rank 1 step 30 layer ") + kNanLayer), std::string::npos) << keel.output();
  ASSERT_FALSE(keel.find_or_wait_for("keel: screenshot", 60).empty()) << keel.output();
  EXPECT_EQ(keel.wait_exit(), 0);

  int width = 0, height = 0, channels = 0;
  unsigned char* pixels = stbi_load(png.c_str(), &width, &height, &channels, 3);
  ASSERT_NE(pixels, nullptr) << "cannot read " << png;
  auto nonfinite = [&](int rank, int first_layer, int last_layer) {
    return nonfinite_pixels(pixels, width, height, g, rank, first_layer, last_layer);
  };
  EXPECT_GT(nonfinite(1, kNanLayerColumn, kNanLayerColumn), 4) << "rank 1's NaN cell is not shown: " << png;
  EXPECT_EQ(nonfinite(0, 0, g.layers - 1), 0) << "rank 0 has no NaN: " << png;
  stbi_image_free(pixels);
}

TEST_F(RanksGuiTest, AClickOnRankOnesRowShowsThatRankAndLayer) {
  ChildProcess keel(connect_both());
  ASSERT_FALSE(keel.wait_for("keel: ranks", 60).empty()) << keel.output();
  // Clicked before the app is past its backfill, the click can land where the rows no longer
  // are (the view logs its geometry again when it moves): wait for rank 1's history, then
  // click where the rows were last drawn. Once seen failing this way in a loaded CI run.
  ASSERT_FALSE(keel.find_or_wait_for("keel: first nonfinite rank 1", 60).empty()) << keel.output();
  const std::string log = keel.output();
  const size_t last = log.rfind("keel: ranks ");
  RanksStrip g;
  ASSERT_TRUE(parse_ranks_strip(log.substr(last, log.find('\n', last) - last), g)) << log;
  const std::string window = run_command("xdotool search --sync --limit 1 --name '^keel$'");
  ASSERT_FALSE(window.empty());
  const int x = int(g.x0 + (g.x1 - g.x0) / float(g.layers) * (float(kClickLayerColumn) + 0.5f));
  const int y = int(g.y0 + g.row * 1.5f);
  // Focused first and retried, as in gui_test.cpp: without a window manager nothing focuses a
  // new window, and ImGui's GLFW backend reads the pointer only when it is focused.
  std::string shown;
  for (int attempt = 0; attempt < 4 && shown.empty(); ++attempt) {
    run_command("xdotool windowfocus --sync " + window + " mousemove --window " + window + " " + std::to_string(x) +
                " " + std::to_string(y) + " sleep 0.3 click 1");
    shown = keel.wait_for("keel: showing rank 1", 5);
  }
  ASSERT_FALSE(shown.empty()) << keel.output();
  EXPECT_FALSE(keel.find_or_wait_for(std::string("selected layer ") + kClickLayer, 10).empty()) << keel.output();
}

// DESIGN §5: a skip from the dashboard must take effect on the same step on every rank, or
// the replicas diverge. One real click on Skip sends it to both ranks naming one step ahead,
// and both trainers skip exactly that step.
TEST_F(RanksGuiTest, OneClickOnSkipSkipsTheSameStepOnEveryRank) {
  ChildProcess keel(connect_both());
  float x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  const std::string geometry = keel.wait_for("keel: control skip", 60);
  ASSERT_EQ(std::sscanf(geometry.c_str() + geometry.find("keel: control"), "keel: control skip x0 %f y0 %f x1 %f y1 %f",
                        &x0, &y0, &x1, &y1),
            4)
      << keel.output();
  // Both ranks heard from, the skip goes to each; and rank 1's history is drawn, so the app is
  // past its backfill. (Clicks that never arrived, 1 run in 6 against libtorch 2.11, were the
  // demos starving Xvfb of CPU: see kBackgroundNiceness.)
  ASSERT_FALSE(keel.wait_for("keel: ranks", 60).empty()) << keel.output();
  ASSERT_FALSE(keel.find_or_wait_for("keel: first nonfinite rank 1", 60).empty()) << keel.output();
  const std::string window = run_command("xdotool search --sync --limit 1 --name '^keel$'");
  ASSERT_FALSE(window.empty());
  std::string clicked, xdotool;
  for (int attempt = 0; attempt < 4 && clicked.empty(); ++attempt) {
    xdotool += run_command("xdotool windowfocus --sync " + window + " mousemove --window " + window + " " +
                           std::to_string(int((x0 + x1) / 2)) + " " + std::to_string(int((y0 + y1) / 2)) +
                           " sleep 0.3 click 1 getmouselocation 2>&1") + "\n";
    clicked = keel.wait_for("keel: clicked Skip next update", 5);
  }
  ASSERT_FALSE(clicked.empty()) << "window " << window << ", xdotool said:\n" << xdotool << keel.output();
  long long step[2] = {-1, -1};
  for (int i = 0; i < 2; ++i) {
    const std::string ack = keel.wait_for("keel: command skip", 30);
    ASSERT_NE(ack.find("acknowledged at step "), std::string::npos) << keel.output();
    ASSERT_EQ(std::sscanf(ack.c_str() + ack.find("at step "), "at step %lld", &step[i]), 1) << ack;
  }
  EXPECT_EQ(step[0], step[1]) << "the ranks were told different steps";
  // Each rank was sent that step by name (at_step), not "the next update": two unsynchronised
  // skips of ranks started together could land on one step by chance.
  for (int rank = 0; rank < 2; ++rank) {
    const std::string sent = keel.find_or_wait_for(" rank " + std::to_string(rank) + " at step ", 5);
    ASSERT_NE(sent.find("keel: sent command skip id"), std::string::npos) << keel.output();
    long long named = -1;
    ASSERT_EQ(std::sscanf(sent.c_str() + sent.find(" at step "), " at step %lld", &named), 1) << sent;
    EXPECT_EQ(named, step[0]) << sent;
  }
  for (int rank = 0; rank < 2; ++rank) {
    const std::string skipped = demos_[rank]->wait_for("step " + std::to_string(step[0]) + " event skip", 30);
    EXPECT_NE(skipped.find("update skipped: command"), std::string::npos)
        << "rank " << rank << " did not skip step " << step[0] << ": " << demos_[rank]->output().substr(0, 2000);
  }
}

}  // namespace
