// The device verdict's rule (probe/src/cuda/step_verdict.hpp) on the CPU: what makes a step
// unsafe, folded from per-tensor results as the verdict kernel's threads fold them. It must
// say what StepHealth::blown_up says (step_health.hpp), or the device would skip steps the
// host reports as applied.
#include <gtest/gtest.h>

#include <cfloat>
#include <cstring>
#include <limits>
#include <vector>

#include "cuda/step_verdict.hpp"

namespace {

using namespace keel::probe::cuda;

uint32_t bits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

GradAccumulator tensor_of(const std::vector<float>& values) {
  GradAccumulator acc;
  for (float v : values) acc.add(v);
  return acc;
}

VerdictTotals fold_all(const std::vector<GradAccumulator>& tensors) {
  VerdictTotals totals;
  for (const auto& t : tensors) totals.fold(t);
  return totals;
}

constexpr double kFp32Max = FLT_MAX;

TEST(StepVerdict, FiniteGradientsAndLossAreSafe) {
  const auto totals = fold_all({tensor_of({1.0f, -2.0f}), tensor_of({0.0f, 3e18f})});
  EXPECT_FALSE(totals.unsafe(bits(0.5f), kFp32Max));
  EXPECT_EQ(found_inf_value(totals.unsafe(bits(0.5f), kFp32Max)), 0.0f);
}

TEST(StepVerdict, AnyNonfiniteGradientValueIsUnsafe) {
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    const auto totals = fold_all({tensor_of({1.0f}), tensor_of({2.0f, bad})});
    EXPECT_TRUE(totals.unsafe(bits(0.5f), kFp32Max)) << bad;
    EXPECT_EQ(found_inf_value(totals.unsafe(bits(0.5f), kFp32Max)), 1.0f);
  }
}

TEST(StepVerdict, ANonfiniteLossIsUnsafe) {
  const auto totals = fold_all({tensor_of({1.0f})});
  EXPECT_TRUE(totals.unsafe(bits(std::numeric_limits<float>::quiet_NaN()), kFp32Max));
  EXPECT_TRUE(totals.unsafe(bits(-std::numeric_limits<float>::infinity()), kFp32Max));
  EXPECT_FALSE(totals.unsafe(bits(-FLT_MAX), kFp32Max));
  EXPECT_FALSE(totals.unsafe(bits(0.0f), kFp32Max)) << "no loss reads as 0 bits";
}

// A poisoned batch: every value finite, the global sum of squares above FLT_MAX (norm > 1.8e19),
// made of layers that are each below it.
TEST(StepVerdict, ASumOfSquaresAboveTheBoundIsUnsafeEvenWhenEveryLayerIsBelowIt) {
  const GradAccumulator layer = tensor_of({1.5e19f});   // 2.25e38 < FLT_MAX = 3.4e38
  ASSERT_LT(layer.sumsq, kFp32Max);
  EXPECT_FALSE(fold_all({layer}).unsafe(bits(1.0f), kFp32Max));
  EXPECT_TRUE(fold_all({layer, layer}).unsafe(bits(1.0f), kFp32Max));
  // The spike policy's bound is lower: the same rule with its number.
  EXPECT_TRUE(fold_all({tensor_of({10.0f})}).unsafe(bits(1.0f), 99.0));
  EXPECT_FALSE(fold_all({tensor_of({10.0f})}).unsafe(bits(1.0f), 100.0));
}

// A scaler backs off for non-finite gradient values only: a NaN loss, a finite overflow of
// the sum or a spike bound makes the step unsafe without being the scaler's overflow.
TEST(StepVerdict, TheScalersOverflowIsANonfiniteGradientValueOnly) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(fold_all({tensor_of({1.0f}), tensor_of({-inf})}).gradients_nonfinite());
  const auto finite = fold_all({tensor_of({1e30f, 1e30f})});
  EXPECT_FALSE(finite.gradients_nonfinite());
  EXPECT_TRUE(finite.unsafe(bits(std::numeric_limits<float>::quiet_NaN()), kFp32Max));
  EXPECT_TRUE(finite.unsafe(bits(1.0f), kFp32Max)) << "2e60 is above FLT_MAX";
  EXPECT_FALSE(finite.unsafe(bits(1.0f), std::numeric_limits<double>::infinity())) << "no bound: a scaler alone";
}

TEST(StepVerdict, MergingPartialTotalsGivesTheWholeFold) {
  const std::vector<GradAccumulator> tensors = {tensor_of({1.0f, 2.0f}), tensor_of({std::numeric_limits<float>::quiet_NaN()}),
                                                tensor_of({3.0f})};
  VerdictTotals a, b;
  a.fold(tensors[0]);
  b.fold(tensors[1]);
  b.fold(tensors[2]);
  a.merge(b);
  const auto whole = fold_all(tensors);
  EXPECT_EQ(a.nonfinite, whole.nonfinite);
  EXPECT_EQ(a.nonfinite, 1u);
  EXPECT_TRUE(a.unsafe(bits(1.0f), kFp32Max));
}

}  // namespace
