// Ranks gone quiet: said once per silence, after they had sent something, and re-armed when
// they send again.
#include "alert/silence_watch.hpp"

#include <gtest/gtest.h>

namespace keel::app {
namespace {

using namespace std::chrono_literals;
using Clock = SilenceWatch::Clock;

TEST(SilenceWatch, ARankThatStopsIsSaidOnceWithItsLastStep) {
  SilenceWatch watch(120);
  const Clock::time_point t0 = Clock::now();
  EXPECT_TRUE(watch.due(t0 + 1000s).empty()) << "no rank heard: nothing to be silent";
  EXPECT_EQ(watch.heard({0, "demo-run", "", 41}, t0), SilenceWatch::Change::kFirstHeard);
  EXPECT_EQ(watch.heard({0, "demo-run", "", 42}, t0 + 1s), SilenceWatch::Change::kNone);
  EXPECT_TRUE(watch.due(t0 + 120s).empty());
  const std::vector<SilenceWatch::Silence> silent = watch.due(t0 + 122s);
  ASSERT_EQ(silent.size(), 1u);
  EXPECT_EQ(silent[0].last.rank, 0);
  EXPECT_EQ(silent[0].last.run, "demo-run");
  EXPECT_EQ(silent[0].last.step, 42);
  EXPECT_DOUBLE_EQ(silent[0].silent_secs, 121.0);
  EXPECT_TRUE(watch.due(t0 + 500s).empty()) << "once per silence";
}

TEST(SilenceWatch, ARankHeardAgainIsReArmed) {
  SilenceWatch watch(10);
  const Clock::time_point t0 = Clock::now();
  watch.heard({1, "r", "", 5}, t0);
  ASSERT_EQ(watch.due(t0 + 11s).size(), 1u);
  EXPECT_EQ(watch.heard({1, "r", "", 6}, t0 + 20s), SilenceWatch::Change::kHeardAgain);
  EXPECT_TRUE(watch.due(t0 + 29s).empty());
  const std::vector<SilenceWatch::Silence> again = watch.due(t0 + 31s);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].last.step, 6);
}

TEST(SilenceWatch, EachRankIsWatchedApart) {
  SilenceWatch watch(10);
  const Clock::time_point t0 = Clock::now();
  watch.heard({0, "r", "", 5}, t0);
  watch.heard({1, "r", "", 5}, t0 + 8s);
  const std::vector<SilenceWatch::Silence> silent = watch.due(t0 + 12s);
  ASSERT_EQ(silent.size(), 1u);
  EXPECT_EQ(silent[0].last.rank, 0);
  EXPECT_EQ(watch.heard({-3, "r", "", 5}, t0), SilenceWatch::Change::kNone) << "a rank no job has is not kept";
}

}  // namespace
}  // namespace keel::app
