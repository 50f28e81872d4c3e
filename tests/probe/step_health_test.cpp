// assess_step on hand-made gradient statistics: which steps are unsafe, why, and which layer
// the first_nonfinite event names.
#include "step/step_health.hpp"

#include <gtest/gtest.h>

#include <cfloat>
#include <limits>

namespace keel::probe {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

GradStats sumsq(double s) {
  GradStats g;
  g.sumsq = s;
  return g;
}

GradStats nonfinite(int64_t count) {
  GradStats g;
  g.sumsq = kNaN;
  g.nonfinite = count;
  return g;
}

// Backward order reversed from model order (the last layer's gradient arrives first).
int64_t reversed_of_3(size_t layer) { return 2 - static_cast<int64_t>(layer); }

TEST(StepHealth, OrdinaryGradientsAndLossAreHealthy) {
  const auto h = assess_step(0.7, true, {sumsq(1.0), sumsq(4.0), sumsq(4.0)}, reversed_of_3);
  EXPECT_FALSE(h.blown_up());
  EXPECT_EQ(h.cause(), "");
  EXPECT_DOUBLE_EQ(h.grad_norm, 3.0);
  EXPECT_EQ(h.layer, StepHealth::kNoLayer);
}

TEST(StepHealth, NonFiniteValuesNameTheFirstInBackwardOrder) {
  const auto h = assess_step(kNaN, true, {nonfinite(3), sumsq(1.0), nonfinite(1)}, reversed_of_3);
  EXPECT_TRUE(h.blown_up());
  EXPECT_EQ(h.nonfinite_layers, 2);
  EXPECT_FALSE(h.norm_overflow) << "non-finite values are their own cause, not an overflow";
  EXPECT_EQ(h.cause(), "non-finite gradient values + non-finite loss");
  EXPECT_EQ(h.layer, 2u);
}

TEST(StepHealth, ALayerAboveFloat32NamesTheFirstOverflowingLayer) {
  const auto h = assess_step(1.0, true, {sumsq(1e50), sumsq(1e58), sumsq(1.0)}, reversed_of_3);
  EXPECT_TRUE(h.norm_overflow);
  EXPECT_EQ(h.overflow_layers, 2);
  EXPECT_EQ(h.cause(), "overflowing grad norm");
  EXPECT_EQ(h.layer, 1u) << "layer 1 comes before layer 0 in backward order";
  EXPECT_TRUE(std::isfinite(h.grad_norm));
}

TEST(StepHealth, AnOverflowThatIsTheSumOfManyLayersNamesTheLargest) {
  const double each = FLT_MAX * 0.6;   // no layer overflows alone, two together do
  const auto h = assess_step(1.0, true, {sumsq(each), sumsq(each * 1.1), sumsq(1.0)}, reversed_of_3);
  EXPECT_TRUE(h.norm_overflow);
  EXPECT_EQ(h.overflow_layers, 0);
  EXPECT_EQ(h.layer, 1u);
}

TEST(StepHealth, JustBelowFloat32IsHealthy) {
  const auto h = assess_step(1.0, true, {sumsq(FLT_MAX * 0.99)}, [](size_t) { return int64_t{0}; });
  EXPECT_FALSE(h.blown_up());
}

TEST(StepHealth, ANonFiniteLossAloneIsUnsafeUnlessThereIsNoLoss) {
  const auto h = assess_step(kInf, true, {sumsq(1.0), sumsq(9.0), sumsq(4.0)}, reversed_of_3);
  EXPECT_TRUE(h.blown_up());
  EXPECT_EQ(h.cause(), "non-finite loss");
  EXPECT_EQ(h.layer, 1u);
  EXPECT_FALSE(assess_step(kNaN, false, {sumsq(1.0)}, reversed_of_3).blown_up());
}

TEST(StepHealth, LayersWhoseHookDidNotFireComeLast) {
  const auto h = assess_step(1.0, true, {sumsq(1e50), sumsq(1e50)},
                             [](size_t layer) { return layer == 0 ? int64_t{-1} : int64_t{0}; });
  EXPECT_EQ(h.layer, 1u);
}

TEST(StepHealth, TheEventTextSaysWhatWasSeen) {
  const std::vector<GradStats> grads{sumsq(1e50), sumsq(1e58), sumsq(1.0)};
  const auto h = assess_step(kInf, true, grads, reversed_of_3);
  const std::string text = describe_health(h, kInf, grads, {"a", "b", "c"});
  EXPECT_EQ(text, "overflowing grad norm + non-finite loss: grad norm 1e+29 overflows float32 (above 1.8e19); "
                  "loss inf; first in backward order to overflow: b (norm 1e+29, 2 of 3 layers overflow)");
}

}  // namespace
}  // namespace keel::probe
