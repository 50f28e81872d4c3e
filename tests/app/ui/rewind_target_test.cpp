// rewind_target: the Rewind confirmation's field read as a rewind command's to_step. Nothing
// typed is the newest snapshot (-1); a step is digits; anything else sends nothing.
#include "ui/rewind_target.hpp"

#include <gtest/gtest.h>

namespace keel::app::ui {
namespace {

TEST(RewindTarget, NothingTypedIsTheNewestSnapshotAndDigitsAreTheStep) {
  EXPECT_EQ(rewind_target(""), -1);
  EXPECT_EQ(rewind_target("   "), -1);
  EXPECT_EQ(rewind_target("6000"), 6000);
  EXPECT_EQ(rewind_target(" 0 "), 0);
  EXPECT_EQ(rewind_target("9223372036854775807"), INT64_MAX);
}

TEST(RewindTarget, AnythingElseIsNotAStep) {
  for (const char* typed : {"-1", "+5", "12a", "1 2", "abc", "1e3", "0x10", "9223372036854775808"}) {
    EXPECT_FALSE(rewind_target(typed).has_value()) << typed;
  }
}

}  // namespace
}  // namespace keel::app::ui
