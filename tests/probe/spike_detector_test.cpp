// The spike rule on synthetic grad-norm series: silent during warm-up, a multiplicative jump
// far above the window's spread is flagged with its z-score, ordinary noise is not, and a
// lasting change of level stops being flagged once the window has seen it.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "step/spike_detector.hpp"

namespace {

using keel::probe::SpikeDetector;
using keel::probe::SpikeRule;

// Log-normal noise around `level`: sigma 0.1 in log units, like a settled training run.
struct NoisyNorms {
  std::mt19937 rng{7};
  std::normal_distribution<double> noise{0.0, 0.1};
  double next(double level) { return level * std::exp(noise(rng)); }
};

TEST(SpikeDetector, DecidesNothingDuringWarmUp) {
  SpikeDetector detector(SpikeRule{128, 64, 6.0, 0.01});
  NoisyNorms norms;
  for (int i = 0; i < 63; ++i) EXPECT_FALSE(detector.observe(norms.next(1.0)).decided);
  // Even an enormous jump: the window is too young to judge.
  const auto early = detector.observe(1e6);
  EXPECT_FALSE(early.decided);
  EXPECT_FALSE(early.spike);
}

TEST(SpikeDetector, FlagsAHundredfoldJumpButNotNoise) {
  SpikeDetector detector;
  NoisyNorms norms;
  for (int i = 0; i < 2000; ++i) {
    const auto verdict = detector.observe(norms.next(2.0));
    if (i >= 64) {
      ASSERT_TRUE(verdict.decided) << i;
      ASSERT_FALSE(verdict.spike) << "noise of 0.1 log units flagged at step " << i << ", z " << verdict.z;
    }
  }
  const auto spike = detector.observe(200.0);
  EXPECT_TRUE(spike.decided);
  EXPECT_TRUE(spike.spike);
  // log(100) / 0.1 ~ 46 sigma; the estimated spread is close to 0.1.
  EXPECT_GT(spike.z, 35.0);
  EXPECT_LT(spike.z, 60.0);
  EXPECT_NEAR(spike.mean_norm, 2.0, 0.1);
  EXPECT_EQ(spike.compared_with, 128u);
  // A drop is never a spike: the rule is one-sided.
  EXPECT_FALSE(detector.observe(0.0002).spike);
}

TEST(SpikeDetector, ALastingNewLevelStopsBeingFlagged) {
  SpikeDetector detector;
  NoisyNorms norms;
  for (int i = 0; i < 300; ++i) detector.observe(norms.next(1.0));
  int flagged = 0;
  int last_flagged = -1;
  for (int i = 0; i < 300; ++i) {
    if (detector.observe(norms.next(30.0)).spike) {
      ++flagged;
      last_flagged = i;
    }
  }
  EXPECT_GE(flagged, 1);
  EXPECT_LT(last_flagged, 64) << "still flagging the new level after " << last_flagged << " steps";
}

TEST(SpikeDetector, ANonFiniteNormIsASpikeEvenInWarmUpAndIsNotKept) {
  SpikeDetector detector(SpikeRule{8, 4, 6.0, 0.01});
  detector.observe(1.0);
  for (double bad : {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
    const auto verdict = detector.observe(bad);
    EXPECT_TRUE(verdict.decided);
    EXPECT_TRUE(verdict.spike);
    EXPECT_TRUE(std::isinf(verdict.z));
  }
  EXPECT_EQ(detector.observations(), 1u);
  // The window is as it was: an ordinary norm after warm-up is judged against finite history.
  for (int i = 0; i < 4; ++i) detector.observe(1.0 + 0.01 * i);
  const auto after = detector.observe(1.01);
  EXPECT_TRUE(after.decided);
  EXPECT_FALSE(after.spike);
  EXPECT_TRUE(std::isfinite(after.z));
}

TEST(SpikeDetector, AZeroNormIsNeitherJudgedNorKept) {
  SpikeDetector detector(SpikeRule{8, 4, 6.0, 0.01});
  for (int i = 0; i < 4; ++i) detector.observe(1.0 + 0.01 * i);
  const auto verdict = detector.observe(0.0);
  EXPECT_FALSE(verdict.decided);
  EXPECT_FALSE(verdict.spike);
  EXPECT_EQ(detector.observations(), 4u);
}

TEST(SpikeDetector, AFlatHistoryUsesTheMinimumSpread) {
  SpikeDetector detector(SpikeRule{16, 8, 6.0, 0.01});
  for (int i = 0; i < 16; ++i) detector.observe(1.0);
  // 5% above a perfectly flat history: 4.9 minimum-spreads, not infinitely many sigmas.
  const auto small = detector.observe(1.05);
  EXPECT_FALSE(small.spike);
  EXPECT_NEAR(small.z, std::log(1.05) / 0.01, 1e-6);
  EXPECT_TRUE(detector.observe(1.2).spike);
}

}  // namespace

namespace {

// The device verdict skips above bound_norm(); observe() must call exactly that a spike, or
// a deferred step would be skipped on the device and reported applied (or the reverse).
TEST(SpikeDetector, TheBoundIsWhereObserveStartsCallingASpike) {
  SpikeDetector detector(SpikeRule{32, 16, 6.0, 0.01});
  NoisyNorms norms;
  for (int i = 0; i < 15; ++i) {
    detector.observe(norms.next(3.0));
    EXPECT_TRUE(std::isinf(detector.bound_norm())) << "warm-up: only a non-finite norm is a spike";
  }
  for (int i = 0; i < 40; ++i) {
    detector.observe(norms.next(3.0));
    const double bound = detector.bound_norm();
    ASSERT_TRUE(std::isfinite(bound));
    SpikeDetector below = detector, above = detector;
    EXPECT_FALSE(below.observe(bound * (1 - 1e-9)).spike) << i;
    EXPECT_TRUE(above.observe(bound * (1 + 1e-9)).spike) << i;
  }
}

}  // namespace
