// The y ticks of a plot: readable labels on short plots, whatever the axis.
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ui/plot.hpp"

namespace keel::app::ui {
namespace {

constexpr float kFontPx = 13.0f;

PlotFrame frame_of(float height_px, double low, double high, bool log_y) {
  PlotFrame frame;
  frame.min = ImVec2(40, 100);
  frame.max = ImVec2(300, 100 + height_px);
  frame.log_y = log_y;
  frame.y_low = log_y ? std::log10(low) : low;
  frame.y_high = log_y ? std::log10(high) : high;
  return frame;
}

std::vector<AxisTick> labelled(const std::vector<AxisTick>& ticks) {
  std::vector<AxisTick> out;
  for (const AxisTick& t : ticks) {
    if (!t.label.empty()) out.push_back(t);
  }
  return out;
}

void expect_labels_a_line_apart(const std::vector<AxisTick>& ticks) {
  const auto labels = labelled(ticks);
  for (size_t i = 1; i < labels.size(); ++i) {
    EXPECT_GE(labels[i - 1].y - labels[i].y, kFontPx * 1.1f)
        << labels[i - 1].label << " and " << labels[i].label << " overlap";
  }
}

// The layer detail's grad norm in the README screenshot: 1.5 decades on a 60 px log axis
// put 0.2, 0.4 and 0.6 within one line of each other.
TEST(PlotTicks, LogAxisOfUnderTwoDecadesKeepsLabelsALineApart) {
  const auto ticks = y_axis_ticks(frame_of(60, 0.02, 0.7, true), kFontPx);
  EXPECT_GE(labelled(ticks).size(), 2u);
  expect_labels_a_line_apart(ticks);
  // Every tick keeps its grid line, labelled or not, and lies inside the plot.
  for (const AxisTick& t : ticks) {
    EXPECT_GE(t.y, 100.0f);
    EXPECT_LE(t.y, 160.0f);
  }
}

TEST(PlotTicks, DecadesAreLabelledAsPowersOfTen) {
  const auto ticks = y_axis_ticks(frame_of(200, 1e-4, 10, true), kFontPx);
  const auto labels = labelled(ticks);
  ASSERT_GE(labels.size(), 3u);
  for (const AxisTick& t : labels) {
    EXPECT_EQ(t.label.rfind("1e", 0), 0u) << t.label;
    EXPECT_DOUBLE_EQ(t.value, std::pow(10.0, std::round(std::log10(t.value))));
  }
  expect_labels_a_line_apart(ticks);
}

TEST(PlotTicks, LinearAxisLabelsAreEvenAndApart) {
  for (float height : {40.0f, 60.0f, 120.0f, 400.0f}) {
    const auto ticks = y_axis_ticks(frame_of(height, -1, 1, false), kFontPx);
    EXPECT_GE(labelled(ticks).size(), 1u) << height;
    expect_labels_a_line_apart(ticks);
  }
}

TEST(PlotTicks, LabelsStayApartOnAnyShortLogAxis) {
  for (double decades = 0.1; decades < 2.0; decades += 0.1) {
    for (float height : {40.0f, 60.0f, 90.0f}) {
      SCOPED_TRACE(testing::Message() << decades << " decades, " << height << " px");
      expect_labels_a_line_apart(y_axis_ticks(frame_of(height, 0.01, 0.01 * std::pow(10.0, decades), true), kFontPx));
    }
  }
}

}  // namespace
}  // namespace keel::app::ui
