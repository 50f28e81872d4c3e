// HeatmapImage: the heatmap's cells become texels whose colours keep what the cells say: a
// non-finite cell has its own colour and stays wide enough to see, a cell without data is not
// mistaken for a small value, and the viridis scale spans exactly the finite cells' log range.
#include "ui/heatmap_image.hpp"

#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "ui/colormap.hpp"

namespace keel::app::ui {
namespace {

Summary finite(float value) {
  Summary s;
  s.min = s.max = value;
  s.flags = kHasData;
  return s;
}

Summary nan_cell() {
  Summary s;
  s.flags = kHasData | kHasNan;
  return s;
}

int lightness(Rgba colour) {
  return int(colour & 0xFF) + int((colour >> 8) & 0xFF) + int((colour >> 16) & 0xFF);
}

TEST(HeatmapImage, ScaleSpansTheFiniteCellsLogRangeEndToEnd) {
  const std::vector<Summary> cells = {finite(1e-3f), finite(1e-2f), finite(1e-1f), finite(1.0f)};
  HeatmapImage image;
  image.build(cells, 1, 4, 1);
  EXPECT_NEAR(image.log_low(), -3.0, 1e-5);
  EXPECT_NEAR(image.log_high(), 0.0, 1e-5);
  ASSERT_EQ(image.pixels().size(), 4u);
  EXPECT_EQ(image.pixels()[0], viridis(0.0f));
  EXPECT_EQ(image.pixels()[3], viridis(1.0f));
  // Brighter means larger (viridis is monotone in lightness).
  for (size_t c = 1; c < 4; ++c) EXPECT_GT(lightness(image.pixels()[c]), lightness(image.pixels()[c - 1]));
}

TEST(HeatmapImage, ColourFollowsTheCellsMaxNotItsMin) {
  Summary spike = finite(1e-3f);
  spike.max = 1.0f;  // one spiking step inside a wide column
  const std::vector<Summary> cells = {finite(1e-3f), spike};
  HeatmapImage image;
  image.build(cells, 1, 2, 1);
  EXPECT_EQ(image.pixels()[1], viridis(1.0f));
}

TEST(HeatmapImage, NonfiniteCellsHaveTheirOwnColourWidenedToTheMinimum) {
  const size_t columns = 20;
  std::vector<Summary> cells(2 * columns, finite(0.5f));
  cells[1 * columns + 10] = nan_cell();
  HeatmapImage image;
  image.build(cells, 2, columns, 4);
  int marked = 0;
  for (size_t c = 0; c < columns; ++c) {
    EXPECT_NE(image.pixels()[c], kNonfiniteColour) << "the first row has no NaN, column " << c;
    marked += image.pixels()[columns + c] == kNonfiniteColour;
  }
  EXPECT_EQ(marked, 4);
  // Around the NaN's own column (one before it, two after: an even width has no centre).
  for (size_t c = 9; c <= 12; ++c) EXPECT_EQ(image.pixels()[columns + c], kNonfiniteColour) << c;
  EXPECT_NE(image.pixels()[columns + 8], kNonfiniteColour);
  EXPECT_NE(image.pixels()[columns + 13], kNonfiniteColour);
}

TEST(HeatmapImage, WideningStopsAtTheRowsEdges) {
  std::vector<Summary> cells(2 * 3, finite(0.5f));
  cells[2] = nan_cell();  // last column of row 0: must not spill into row 1
  HeatmapImage image;
  image.build(cells, 2, 3, 4);
  EXPECT_EQ(image.pixels()[1], kNonfiniteColour);
  EXPECT_EQ(image.pixels()[2], kNonfiniteColour);
  for (size_t c = 3; c < 6; ++c) EXPECT_NE(image.pixels()[c], kNonfiniteColour);
}

TEST(HeatmapImage, InfinitiesAreNonfiniteTooAndDoNotStretchTheScale) {
  Summary inf;
  inf.flags = kHasData | kHasPosInf;
  Summary inf_with_finite = finite(1e30f);
  inf_with_finite.flags |= kHasPosInf;
  const std::vector<Summary> cells = {finite(1.0f), finite(10.0f), inf};
  HeatmapImage image;
  image.build(cells, 1, 3, 1);
  EXPECT_EQ(image.pixels()[2], kNonfiniteColour);
  EXPECT_NEAR(image.log_high(), 1.0, 1e-5);
}

TEST(HeatmapImage, CellsWithoutDataAreNotColouredAsValues) {
  const std::vector<Summary> cells = {finite(1.0f), Summary{}, finite(10.0f)};
  HeatmapImage image;
  image.build(cells, 1, 3, 1);
  EXPECT_EQ(image.pixels()[1], kNoDataColour);
}

TEST(HeatmapImage, TheGapsOfALayerWithNoGradientAreGreyedWhereTheRunHasSteps) {
  // Row 0 trains; row 1 is frozen now. The run has steps in columns 0-2 of 4: the frozen row's
  // gaps there are greyed, the value it has keeps its colour, a gap in a row that trains stays
  // "no data", and so does the column past the run's last step.
  const std::vector<Summary> cells = {finite(1.0f), Summary{}, finite(10.0f), Summary{},
                                      Summary{}, finite(10.0f), Summary{}, Summary{}};
  NoGradientCells no_gradient;
  no_gradient.rows = {false, true};
  no_gradient.first_column = 0;
  no_gradient.end_column = 3;
  HeatmapImage image;
  image.build(cells, 2, 4, 1, no_gradient);
  EXPECT_EQ(image.pixels()[1], kNoDataColour);
  EXPECT_EQ(image.pixels()[4], kNoGradientColour);
  EXPECT_EQ(image.pixels()[6], kNoGradientColour);
  EXPECT_EQ(image.pixels()[7], kNoDataColour);
  EXPECT_EQ(image.pixels()[5], image.pixels()[2]);
  EXPECT_NE(kNoGradientColour, kNoDataColour);
}

TEST(HeatmapImage, ZerosTakeTheBottomColourAndAConstantMetricTheMiddle) {
  {
    const std::vector<Summary> cells = {finite(0.0f), finite(0.1f), finite(1.0f)};
    HeatmapImage image;
    image.build(cells, 1, 3, 1);
    EXPECT_EQ(image.pixels()[0], viridis(0.0f));
  }
  {
    const std::vector<Summary> cells(5, finite(3.0f));
    HeatmapImage image;
    image.build(cells, 1, 5, 1);
    EXPECT_LT(image.log_low(), std::log10(3.0));
    EXPECT_GT(image.log_high(), std::log10(3.0));
    EXPECT_EQ(image.pixels()[0], viridis(0.5f));
  }
}

// A rewind's abandoned steps (issue 59): where the continuation has no step yet, the cell is the
// abandoned value's grey, lighter for a larger value and lightest for a non-finite one; where
// the continuation has data, or nothing was abandoned, the cell stays as built.
TEST(HeatmapImage, AbandonedCellsWithoutAContinuationAreGreyAndTheContinuationKeepsItsColour) {
  const Summary none;
  const std::vector<Summary> cells = {finite(1e-3f), finite(1.0f), none, none, none, none};
  const std::vector<Summary> abandoned = {finite(1.0f), finite(1.0f), finite(1e-3f), finite(1.0f), nan_cell(), none};
  HeatmapImage image;
  image.build(cells, 1, 6, 1);
  const std::vector<Rgba> built = image.pixels();
  image.grey_abandoned(cells, abandoned);
  const std::vector<Rgba>& p = image.pixels();
  EXPECT_EQ(p[0], built[0]) << "the continuation's own step keeps its colour";
  EXPECT_EQ(p[1], built[1]);
  EXPECT_EQ(p[5], kNoDataColour) << "nothing abandoned there: still no data";
  for (size_t c = 2; c <= 4; ++c) {
    const Rgba g = p[c];
    EXPECT_TRUE((g & 0xFF) == ((g >> 8) & 0xFF) && (g & 0xFF) == ((g >> 16) & 0xFF)) << "cell " << c << " is not grey";
    EXPECT_NE(g, kNoDataColour);
  }
  EXPECT_LT(lightness(p[2]), lightness(p[3])) << "a smaller abandoned value is a darker grey";
  EXPECT_LT(lightness(p[3]), lightness(p[4])) << "a non-finite one is the lightest";
}

}  // namespace
}  // namespace keel::app::ui
