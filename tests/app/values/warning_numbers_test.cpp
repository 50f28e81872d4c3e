// The warning map read in words (values/warning_numbers.hpp): each signal's trend in its own
// terms, since a per_step of 0.04 is +4.1% a step for a ratio, 0.04 nats for log_z, and a fall
// for the loss scale.
#include "values/warning_numbers.hpp"

#include <cmath>
#include <string>

#include <gtest/gtest.h>

namespace keel::app {
namespace {

wire::Warning warning(const std::string& signal, double value, double baseline, double per_step, int64_t lead) {
  return wire::Warning{signal, value, baseline, per_step, lead, "lower the learning rate"};
}

TEST(WarningNumbers, ARatioSignalReadsAsAMultipleOfItsBaselineRisingInPercent) {
  const wire::Warning w = warning("update_ratio", 0.0806, 0.031, 0.04, 35);
  EXPECT_EQ(warning_level_text(w), "0.0806, 2.6x its baseline 0.031");
  EXPECT_EQ(warning_trend_text(w), "rising 4.08% a step");
  EXPECT_EQ(warning_lead_text(w), "may diverge in ~35 steps");
  EXPECT_EQ(warning_numbers_text(w),
            "update_ratio 0.0806, 2.6x its baseline 0.031, rising 4.08% a step; may diverge in ~35 steps");
}

TEST(WarningNumbers, LogZIsAlreadyALogItsTrendIsInNatsAndItsDistanceADifference) {
  const wire::Warning w = warning("log_z", 9.5, 8.2, 0.02, -1);
  EXPECT_EQ(warning_level_text(w), "9.5, 1.3 above its baseline 8.2");
  EXPECT_EQ(warning_trend_text(w), "rising 0.02 a step");
  EXPECT_EQ(warning_lead_text(w), "no estimate of when");
}

TEST(WarningNumbers, TheLossScalesTrendIsHowMuchItFalls) {
  const wire::Warning w = warning("loss_scale", 256, 65536, std::log(2.0), 12);
  EXPECT_EQ(warning_trend_text(w), "falling 50% a step");
  EXPECT_EQ(warning_level_text(w), "256, 0.00391x its baseline 6.55e+04");
}

TEST(WarningNumbers, NonFiniteAndZeroNumbersAreShownAsTheyAre) {
  EXPECT_EQ(warning_level_text(warning("grad_norm", 3.0, 0.0, 0.1, 5)), "3") << "no ratio to a zero baseline";
  EXPECT_EQ(warning_level_text(warning("grad_norm", NAN, 1.0, 0.1, 5)), "nan");
  EXPECT_EQ(warning_trend_text(warning("grad_norm", 3.0, 1.0, INFINITY, 5)), "changing by inf a step");
  EXPECT_EQ(warning_trend_text(warning("grad_norm", 3.0, 1.0, -0.1, 5)), "falling 9.52% a step");
}

}  // namespace
}  // namespace keel::app
