// ColumnGrid: columns tile the range exactly, differ in width by at most one step, and
// column_of() agrees with start().
#include <gtest/gtest.h>

#include "model/column_grid.hpp"

namespace keel::app {
namespace {

TEST(ColumnGrid, ColumnsTileTheRange) {
  for (int columns : {1, 3, 7, 640, 1999}) {
    for (int64_t span : {int64_t{1}, int64_t{5}, int64_t{640}, int64_t{1000003}}) {
      const ColumnGrid grid(-17, -17 + span - 1, columns);
      ASSERT_EQ(grid.columns(), columns);
      EXPECT_EQ(grid.start(0), -17);
      EXPECT_EQ(grid.start(columns), -17 + span);
      EXPECT_EQ(grid.min_column_steps(), span / columns);
      for (int c = 0; c < columns; ++c) {
        const int64_t width = grid.start(c + 1) - grid.start(c);
        EXPECT_GE(width, span / columns);
        EXPECT_LE(width, span / columns + 1);
      }
    }
  }
}

TEST(ColumnGrid, ColumnOfAgreesWithStarts) {
  const ColumnGrid grid(1000, 1000 + 99999, 777);
  for (int64_t step = 1000; step <= 1000 + 99999; step += 13) {
    const int c = grid.column_of(step);
    EXPECT_LE(grid.start(c), step);
    EXPECT_GT(grid.start(c + 1), step);
  }
  EXPECT_EQ(grid.column_of(0), 0);
  EXPECT_EQ(grid.column_of(1 << 30), 776);
}

TEST(ColumnGrid, BadArgumentsAreClamped) {
  const ColumnGrid grid(50, 10, 0);
  EXPECT_EQ(grid.columns(), 1);
  EXPECT_EQ(grid.first_step(), 50);
  EXPECT_EQ(grid.last_step(), 50);
  const ColumnGrid huge(0, 10, 1 << 30);
  EXPECT_EQ(huge.columns(), ColumnGrid::kMaxColumns);
}

}  // namespace
}  // namespace keel::app
