// draw_series' bridge: a series sampled every few steps by design (a wide model's layers, sent
// per layer every 16 steps) is drawn as one trace over its empty columns, not as dots; a gap
// longer than the bridge, and a non-finite column, still break it.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>
#include <imgui.h>

#include "model/column_grid.hpp"
#include "ui/plot.hpp"

namespace keel::app::ui {
namespace {

constexpr ImU32 kColour = IM_COL32(255, 255, 255, 255);
constexpr int kColumns = 49;

class PlotSeries : public ::testing::Test {
 protected:
  void SetUp() override {
    ImGui::CreateContext();
    ImGui::GetIO().IniFilename = nullptr;   // no imgui.ini left in the working directory
    unsigned char* pixels = nullptr;
    int width = 0, height = 0;
    ImGui::GetIO().Fonts->GetTexDataAsRGBA32(&pixels, &width, &height);
    // A frame sets up what shapes are drawn with (circle segments, the white texel).
    ImGui::GetIO().DisplaySize = ImVec2(1000, 1000);
    ImGui::GetIO().DeltaTime = 1.0f / 60;
    ImGui::NewFrame();
    frame_.min = ImVec2(0, 0);
    frame_.max = ImVec2(float(kColumns), 100);
    frame_.y_low = 0;
    frame_.y_high = 10;
  }
  void TearDown() override {
    ImGui::EndFrame();
    ImGui::DestroyContext();
  }

  // Whether draw_series draws a triangle from left of x `from` to right of x `to`: a trace
  // across the columns between.
  bool joins(const std::vector<Summary>& columns, int bridge, float from, float to) {
    ImDrawList list(ImGui::GetDrawListSharedData());
    list._ResetForNewFrame();
    list.PushClipRect(ImVec2(-1000, -1000), ImVec2(10000, 10000), false);
    draw_series(&list, frame_, columns, kColour, bridge);
    for (int i = 0; i + 2 < list.IdxBuffer.Size; i += 3) {
      float lo = 1e9f, hi = -1e9f;
      for (int k = 0; k < 3; ++k) {
        const float x = list.VtxBuffer[list.IdxBuffer[i + k]].pos.x;
        lo = std::min(lo, x);
        hi = std::max(hi, x);
      }
      if (lo < from && hi > to) return true;
    }
    return false;
  }

  PlotFrame frame_;
};

Summary one_sample(float value) {
  SummaryBuilder builder;
  builder.add_value(value);
  return builder.finish();
}

// A sample every 16 columns: steps 0, 16, 32, 48.
std::vector<Summary> sampled_every_16() {
  std::vector<Summary> columns(kColumns);
  for (int i = 0; i < kColumns; i += 16) columns[size_t(i)] = one_sample(float(1 + i / 16));
  return columns;
}

TEST_F(PlotSeries, ASeriesSampledEverySixteenStepsIsOneTrace) {
  const std::vector<Summary> columns = sampled_every_16();
  for (const float from : {1.0f, 17.0f, 33.0f}) {
    EXPECT_TRUE(joins(columns, 16, from, from + 14)) << "joined from column " << from - 1 << " to the next sample";
  }
  EXPECT_FALSE(joins(columns, 0, 1, 15)) << "without a bridge: dots";
  EXPECT_FALSE(joins(columns, 14, 1, 15)) << "15 empty columns are more than 14";
}

TEST_F(PlotSeries, ANonfiniteColumnStillBreaksTheTrace) {
  std::vector<Summary> columns = sampled_every_16();
  columns[24] = one_sample(std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE(joins(columns, 16, 1, 15)) << "joined up to the NaN";
  EXPECT_FALSE(joins(columns, 16, 17, 31)) << "broken at the NaN (its band is one column wide)";
}

TEST(PlotBridge, ColumnsOfSteps) {
  EXPECT_EQ(bridge_columns(ColumnGrid(0, 99, 100), 16), 16);
  EXPECT_EQ(bridge_columns(ColumnGrid(0, 999, 100), 16), 2) << "ten steps a column";
  EXPECT_EQ(bridge_columns(ColumnGrid(0, 99, 100), 0), 0);
}

}  // namespace
}  // namespace keel::app::ui
