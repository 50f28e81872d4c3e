// AppState: the shared view range and follow-live behave as the keys and mouse promise.
#include "ui/app_state.hpp"

#include <limits>
#include <string>

#include <gtest/gtest.h>

#include "ui/colormap.hpp"
#include "ui/plot.hpp"
#include "ui/verbose_log.hpp"

namespace keel::app::ui {
namespace {

TEST(AppState, FollowsTheNewestStepWhileLive) {
  AppState state;
  state.begin_frame(0, 1000);
  EXPECT_TRUE(state.follow_live());
  EXPECT_DOUBLE_EQ(state.view_last(), 1000);
  state.begin_frame(0, 1010);
  EXPECT_DOUBLE_EQ(state.view_last(), 1010);
}

TEST(AppState, ZoomingIntoThePastStopsFollowingAndSpaceOrHomeResumes) {
  AppState state;
  state.begin_frame(0, 1000);
  state.zoom(0.25, 700);  // zoom in around an old step: the right edge leaves the newest step
  EXPECT_FALSE(state.follow_live());
  EXPECT_LT(state.view_last(), 1000);
  state.begin_frame(0, 1100);
  EXPECT_LT(state.view_last(), 1000) << "a paused view must not move with new data";
  state.toggle_follow_live();
  state.begin_frame(0, 1100);
  EXPECT_TRUE(state.follow_live());
  EXPECT_DOUBLE_EQ(state.view_last(), 1100);

  state.pan(-300);
  EXPECT_FALSE(state.follow_live());
  state.reset_view();
  EXPECT_TRUE(state.follow_live());
  EXPECT_DOUBLE_EQ(state.view_last() - state.view_first(), AppState::kDefaultSpanSteps);
}

TEST(AppState, PanningBackToTheNewestStepResumesFollowing) {
  AppState state;
  state.begin_frame(0, 1000);
  state.pan(-200);
  EXPECT_FALSE(state.follow_live());
  state.pan(500);
  EXPECT_TRUE(state.follow_live());
}

// Issue 29: attached at step 1,320, the NaN of step 200 was one row in the events pane and
// nowhere in the plots. Going to it moves the shared view there; a step already in view leaves
// a live view live.
TEST(AppState, RevealingAStepOutOfViewCentresItAndStopsFollowing) {
  AppState state;
  state.begin_frame(0, 1320);
  ASSERT_GT(state.view_first(), 200);
  state.reveal_step(200);
  state.begin_frame(0, 1321);
  EXPECT_FALSE(state.follow_live());
  EXPECT_LE(state.view_first(), 200);
  EXPECT_GE(state.view_last(), 200);
  EXPECT_DOUBLE_EQ((state.view_first() + state.view_last()) / 2, 200);
  EXPECT_EQ(state.step_before_history(), -1) << "step 200 is held";
  state.begin_frame(0, 1400);
  EXPECT_DOUBLE_EQ((state.view_first() + state.view_last()) / 2, 200) << "once: the user may pan away";

  AppState live;
  live.begin_frame(0, 1000);
  live.reveal_step(900);
  live.begin_frame(0, 1001);
  EXPECT_TRUE(live.follow_live()) << "a step in view moves nothing";
  EXPECT_DOUBLE_EQ(live.view_last(), 1001);
}

// A step older than the history kept cannot be shown: the view goes to the oldest steps held
// and the step is named, for the pane to say where its history is; moving the view forgets it.
TEST(AppState, RevealingAStepBeforeTheHistoryKeptSaysSo) {
  AppState state;
  state.begin_frame(1904, 6000);
  state.reveal_step(200);
  state.begin_frame(1904, 6001);
  EXPECT_EQ(state.step_before_history(), 200);
  EXPECT_FALSE(state.follow_live());
  EXPECT_DOUBLE_EQ(state.view_first(), 1904) << "the oldest span held, not its edge";
  EXPECT_DOUBLE_EQ(state.view_last(), 1904 + AppState::kDefaultSpanSteps);
  state.pan(100);
  EXPECT_EQ(state.step_before_history(), -1);

  state.reveal_step(100);
  state.begin_frame(1904, 6002);
  EXPECT_EQ(state.step_before_history(), 100);
  state.reveal_step(3000);
  state.begin_frame(1904, 6003);
  EXPECT_EQ(state.step_before_history(), -1) << "a step held";
}

TEST(AppState, SelectionFollowsTheLayerNameAcrossRuns) {
  AppState state;
  testing::internal::CaptureStdout();
  state.select(3, "blocks.0.attn.qkv.weight", 12);
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "") << "the log is written with --verbose only";
  set_verbose_log(true);
  testing::internal::CaptureStdout();
  state.select(3, "blocks.0.attn.qkv.weight", 42);
  EXPECT_EQ(testing::internal::GetCapturedStdout(),
            "keel: selected layer blocks.0.attn.qkv.weight step 42\n");
  set_verbose_log(false);
  state.revalidate([](const std::string& name) { return name == "blocks.0.attn.qkv.weight" ? 7 : -1; });
  EXPECT_EQ(state.selected_layer(), 7);
  state.revalidate([](const std::string&) { return -1; });
  EXPECT_EQ(state.selected_layer(), -1);
  EXPECT_TRUE(state.selected_layer_name().empty());
}

TEST(HeatMetric, IsNamedAsItsLayerMetricIsOnTheWire) {
  for (const wire::LayerMetric metric : wire::kHeatmapMetrics) {
    const std::string name = wire::info_of(metric).name;
    ASSERT_TRUE(heat_metric_named(name).has_value()) << name;
    EXPECT_EQ(*heat_metric_named(name), metric) << name;
  }
  EXPECT_EQ(heat_metric_named("update_ratio"), wire::LayerMetric::kUpdateRatio);
  // A metric the heatmap has no view of, a label rather than a name, and nothing.
  EXPECT_FALSE(heat_metric_named("param_norm").has_value());
  EXPECT_FALSE(heat_metric_named("update ratio").has_value());
  EXPECT_FALSE(heat_metric_named("").has_value());
}

TEST(Colormap, IsMonotoneInLightnessAndNeverTheReservedColours) {
  float previous = -1;
  for (int i = 0; i <= 100; ++i) {
    const Rgba c = viridis(float(i) / 100.0f);
    const float luma = 0.3f * float(c & 0xFF) + 0.59f * float((c >> 8) & 0xFF) + 0.11f * float((c >> 16) & 0xFF);
    EXPECT_GE(luma + 1.0f, previous);
    previous = luma;
    EXPECT_NE(c, kNonfiniteColour);
    EXPECT_NE(c, kNoDataColour);
  }
}

TEST(FormatValue, IsShortAndNamesNonFiniteValues) {
  EXPECT_EQ(format_value(0), "0");
  EXPECT_EQ(format_value(0.25), "0.25");
  EXPECT_EQ(format_value(1.5e-3), "0.0015");
  EXPECT_EQ(format_value(2e6), "2e+06");
  EXPECT_EQ(format_value(std::numeric_limits<double>::quiet_NaN()), "NaN");
  EXPECT_EQ(format_value(-std::numeric_limits<double>::infinity()), "-Inf");
}

}  // namespace
}  // namespace keel::app::ui
