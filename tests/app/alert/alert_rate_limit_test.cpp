// The rate limit: one alert per kind and rank every interval, the ones held back counted into
// the next that goes out.
#include "alert/alert_rate_limit.hpp"

#include <gtest/gtest.h>

namespace keel::app {
namespace {

using namespace std::chrono_literals;
using Clock = AlertRateLimit::Clock;

TEST(AlertRateLimit, ABurstGoesOutOnceAndTheNextSaysHowManyWereHeldBack) {
  AlertRateLimit limit(60);
  const Clock::time_point t0 = Clock::now();
  const AlertRateLimit::Verdict first = limit.admit("warning", 0, t0);
  EXPECT_TRUE(first.go);
  EXPECT_EQ(first.suppressed, 0u);
  for (int i = 1; i <= 4; ++i) EXPECT_FALSE(limit.admit("warning", 0, t0 + i * 1s).go) << i;
  EXPECT_FALSE(limit.admit("warning", 0, t0 + 59s).go);
  const AlertRateLimit::Verdict next = limit.admit("warning", 0, t0 + 61s);
  EXPECT_TRUE(next.go);
  EXPECT_EQ(next.suppressed, 5u);
  const AlertRateLimit::Verdict after = limit.admit("warning", 0, t0 + 122s);
  EXPECT_TRUE(after.go);
  EXPECT_EQ(after.suppressed, 0u) << "counted once, then forgotten";
}

TEST(AlertRateLimit, KindsAndRanksAreLimitedApart) {
  AlertRateLimit limit(60);
  const Clock::time_point t0 = Clock::now();
  EXPECT_TRUE(limit.admit("warning", 0, t0).go);
  EXPECT_TRUE(limit.admit("warning", 1, t0).go);
  EXPECT_TRUE(limit.admit("rewind", 0, t0).go);
  EXPECT_FALSE(limit.admit("warning", 1, t0 + 1s).go);
}

TEST(AlertRateLimit, AnIntervalOfZeroLetsEveryAlertOut) {
  AlertRateLimit limit(0);
  const Clock::time_point t0 = Clock::now();
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(limit.admit("warning", 0, t0).go);
}

TEST(AlertRateLimit, RanksNoJobHasShareOneEntry) {
  AlertRateLimit limit(60);
  const Clock::time_point t0 = Clock::now();
  EXPECT_TRUE(limit.admit("warning", -7, t0).go);
  EXPECT_FALSE(limit.admit("warning", 1 << 30, t0).go) << "both outside [0, kMaxRanks): one entry";
}

}  // namespace
}  // namespace keel::app
