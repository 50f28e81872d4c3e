// The rewind policy's rule (snapshot/divergence_rule.hpp): a loss that stays above twice its
// median for ten steps, or three unsafe steps in a row, is a divergence, dated from its first
// step; a noisy healthy loss, one bad batch and two unsafe steps are not.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <random>

#include "snapshot/divergence_rule.hpp"

namespace {

using keel::probe::Divergence;
using keel::probe::DivergenceDetector;

TEST(DivergenceRule, ANoisyDecliningLossNeverDivergesInTenThousandSteps) {
  DivergenceDetector rule;
  std::mt19937 rng(3);
  std::lognormal_distribution<double> noise(0.0, 0.25);   // a minibatch loss: +-25%, a heavy upper tail
  int diverged = 0;
  for (int64_t s = 0; s < 10000; ++s) {
    const double loss = (0.5 + 4.0 / std::sqrt(1.0 + s / 10.0)) * noise(rng);
    diverged += rule.observe(s, loss, false).has_value();
  }
  EXPECT_EQ(diverged, 0);
}

TEST(DivergenceRule, ALossThatStaysHighIsADivergenceDatedFromItsFirstHighStep) {
  DivergenceDetector rule;
  for (int64_t s = 0; s < 100; ++s) ASSERT_FALSE(rule.observe(s, 2.5 + 0.01 * (s % 7), false));
  // One bad batch: ten times the loss for one step, then back.
  EXPECT_FALSE(rule.observe(100, 25.0, false));
  for (int64_t s = 101; s < 150; ++s) ASSERT_FALSE(rule.observe(s, 2.5, false));
  // A divergence: high and slowly coming down, for longer than ten steps.
  std::optional<Divergence> found;
  int64_t at = -1;
  for (int64_t s = 150; s < 200 && !found; ++s) {
    found = rule.observe(s, 25.0 - 0.3 * double(s - 150), false);
    at = s;
  }
  ASSERT_TRUE(found);
  EXPECT_EQ(found->onset, 150);
  EXPECT_EQ(at, 159) << "the tenth high step completes it";
  EXPECT_NE(found->why.find("from step 150"), std::string::npos) << found->why;
  EXPECT_NE(found->why.find("peak 25"), std::string::npos) << found->why;
}

TEST(DivergenceRule, ThreeUnsafeStepsInARowAreADivergenceAndTwoAreNot) {
  DivergenceDetector rule;
  for (int64_t s = 0; s < 20; ++s) ASSERT_FALSE(rule.observe(s, 2.0, false));
  EXPECT_FALSE(rule.observe(20, NAN, true));
  EXPECT_FALSE(rule.observe(21, NAN, true));
  EXPECT_FALSE(rule.observe(22, 2.0, false));
  EXPECT_FALSE(rule.observe(23, NAN, true));
  EXPECT_FALSE(rule.observe(24, NAN, true));
  const std::optional<Divergence> found = rule.observe(25, NAN, true);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->onset, 23);
}

TEST(DivergenceRule, NoVerdictOnTheLossBeforeTheWindowHoldsSixteenLosses) {
  DivergenceDetector rule;
  for (int64_t s = 0; s < 15; ++s) ASSERT_FALSE(rule.observe(s, 1.0, false));
  // With 15 losses there is no bound yet: step 15's high loss enters the window. From step 16
  // on the median is 1, and ten high steps later the run has diverged.
  for (int64_t s = 15; s < 25; ++s) EXPECT_FALSE(rule.observe(s, 100.0, false)) << "step " << s;
  const auto found = rule.observe(25, 100.0, false);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->onset, 16);
}

TEST(DivergenceRule, RestartForgetsARunInProgress) {
  DivergenceDetector rule;
  for (int64_t s = 0; s < 50; ++s) ASSERT_FALSE(rule.observe(s, 1.0, false));
  EXPECT_FALSE(rule.in_run());
  for (int64_t s = 50; s < 59; ++s) ASSERT_FALSE(rule.observe(s, 10.0, false));
  EXPECT_TRUE(rule.in_run()) << "no snapshot should replace an older one now";
  rule.restart();
  EXPECT_FALSE(rule.in_run());
  for (int64_t s = 59; s < 68; ++s) EXPECT_FALSE(rule.observe(s, 10.0, false)) << "step " << s;
  EXPECT_TRUE(rule.observe(68, 10.0, false));
}

}  // namespace
