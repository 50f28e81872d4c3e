// Which events and silences alert: the four event kinds and "silent", narrowed by --alert-on,
// each through the rate limit.
#include "alert/alert_policy.hpp"

#include <gtest/gtest.h>

namespace keel::app {
namespace {

using namespace std::chrono_literals;
using Clock = AlertPolicy::Clock;
namespace kinds = wire::event_kind;

wire::Event event(const std::string& kind, int64_t step, int32_t rank = 0) {
  wire::Event e;
  e.rank = rank;
  e.run = "demo-run";
  e.step = step;
  e.kind = kind;
  return e;
}

TEST(AlertPolicy, TheFourEventKindsAlertAndOthersDoNot) {
  AlertPolicy policy{AlertOptions{}};
  const Clock::time_point t0 = Clock::now();
  for (const char* kind : {kinds::kWarning, kinds::kFirstNonfinite, kinds::kRewind, kinds::kRewindStopped}) {
    const std::optional<Alert> alert = policy.on_event(event(kind, 7), t0, 123);
    ASSERT_TRUE(alert) << kind;
    EXPECT_EQ(alert->kind, kind);
    EXPECT_EQ(alert->step, 7);
    EXPECT_EQ(alert->run, "demo-run");
    EXPECT_EQ(alert->stamp_unix_ns, 123);
    ASSERT_TRUE(alert->event);
    EXPECT_EQ(alert->event->kind, kind);
  }
  for (const char* kind : {kinds::kSkip, kinds::kSpike, kinds::kDump, "silent"}) {
    EXPECT_FALSE(policy.on_event(event(kind, 7), t0, 0)) << kind;
  }
}

TEST(AlertPolicy, AlertOnNarrowsTheKinds) {
  AlertOptions options;
  options.kinds = {kinds::kRewind};
  AlertPolicy policy(options);
  const Clock::time_point t0 = Clock::now();
  EXPECT_FALSE(policy.on_event(event(kinds::kWarning, 1), t0, 0));
  EXPECT_TRUE(policy.on_event(event(kinds::kRewind, 1), t0, 0));
  policy.heard({0, "demo-run", "", 1}, t0);
  EXPECT_TRUE(policy.silences(t0 + 1h, 0).empty()) << "silent was not asked for";
}

TEST(AlertPolicy, ABurstOfWarningsIsOneAlertAndTheNextCountsTheRest) {
  AlertOptions options;
  options.interval_secs = 60;
  AlertPolicy policy(options);
  const Clock::time_point t0 = Clock::now();
  int raised = 0;
  for (int i = 0; i < 5; ++i) raised += policy.on_event(event(kinds::kWarning, 100 + i), t0 + i * 1s, 0).has_value();
  EXPECT_EQ(raised, 1);
  const std::optional<Alert> next = policy.on_event(event(kinds::kWarning, 200), t0 + 61s, 0);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->suppressed, 4u);
  EXPECT_TRUE(policy.on_event(event(kinds::kWarning, 200, 1), t0 + 62s, 0)) << "another rank is its own";
}

TEST(AlertPolicy, ASilentRankAlertsOnceWithItsRunAndLastStep) {
  AlertOptions options;
  options.silent_after_secs = 30;
  AlertPolicy policy(options);
  const Clock::time_point t0 = Clock::now();
  policy.heard({2, "demo-run", "critic", 4512}, t0);
  EXPECT_TRUE(policy.silences(t0 + 29s, 0).empty());
  const std::vector<Alert> silent = policy.silences(t0 + 31s, 99);
  ASSERT_EQ(silent.size(), 1u);
  EXPECT_EQ(silent[0].kind, "silent");
  EXPECT_EQ(silent[0].rank, 2);
  EXPECT_EQ(silent[0].run, "demo-run");
  EXPECT_EQ(silent[0].model, "critic");
  EXPECT_EQ(silent[0].step, 4512);
  EXPECT_DOUBLE_EQ(silent[0].silent_secs, 31.0);
  EXPECT_FALSE(silent[0].event);
  EXPECT_TRUE(policy.silences(t0 + 300s, 0).empty());
}

}  // namespace
}  // namespace keel::app
