// distinct_parts and short_distinct_labels: overlaid runs' legend labels are short, never cut
// inside a number, and still tell the runs apart.
#include "ui/distinct_labels.hpp"

#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace keel::app::ui {
namespace {

using Names = std::vector<std::string>;

const TextWidth kCharacters = [](const std::string& text) { return float(text.size()); };

TEST(DistinctLabels, RunIdsOfOneHostLoseTheHostTheyShare) {
  EXPECT_EQ(distinct_parts({"vm-5999-1795616067812", "vm-6011-1795616099931"}),
            (Names{"5999-1795616067812", "6011-1795616099931"}));
}

TEST(DistinctLabels, SharedPartsGoFromBothEndsButOnlyWholeParts) {
  EXPECT_EQ(distinct_parts({"job.gen.rank0", "job.disc.rank0"}), (Names{"gen", "disc"}));
  // "run-123" and "run-124" share "run-12": only "run-" is a whole part.
  EXPECT_EQ(distinct_parts({"run-123", "run-124"}), (Names{"123", "124"}));
  EXPECT_EQ(distinct_parts({"a/7/x", "a/8/x", "a/9/x"}), (Names{"7", "8", "9"}));
}

TEST(DistinctLabels, NamesAreLeftWholeWhenNothingElseWouldTellThemApart) {
  EXPECT_EQ(distinct_parts({"loss"}), (Names{"loss"}));
  EXPECT_EQ(distinct_parts({"same-run", "same-run"}), (Names{"same-run", "same-run"}));
  // Dropping "run-" from "run-" itself would leave nothing.
  EXPECT_EQ(distinct_parts({"run-", "run-2"}), (Names{"run-", "run-2"}));
  EXPECT_EQ(distinct_parts({"alpha", "beta"}), (Names{"alpha", "beta"}));
}

TEST(DistinctLabels, LongPartsAreElidedInTheMiddleAndStayDistinct) {
  const Names labels =
      short_distinct_labels({"vm-5999-1795616067812", "vm-6011-1795616099931"}, 10.0f, kCharacters, "~");
  ASSERT_EQ(labels.size(), 2u);
  for (const std::string& label : labels) EXPECT_LE(label.size(), 10u) << label;
  EXPECT_EQ(labels[0].front(), '5');
  EXPECT_EQ(labels[1].front(), '6');
  EXPECT_EQ(std::set<std::string>(labels.begin(), labels.end()).size(), 2u);
  // Short enough already: unchanged.
  EXPECT_EQ(short_distinct_labels({"gen", "disc"}, 10.0f, kCharacters, "~"), (Names{"gen", "disc"}));
}

}  // namespace
}  // namespace keel::app::ui
