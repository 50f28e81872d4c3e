// The origin tracer's finiteness check reads exponent bits; it must agree with ATen's
// isfinite for every floating dtype, every position (in the first block and past it), both
// kinds of non-finite value, and a non-contiguous view.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>

#include "origin/finite_check.hpp"

namespace {

TEST(FiniteCheck, AgreesWithAtenForEveryDtypePositionAndKind) {
  const double bad_values[] = {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                               -std::numeric_limits<double>::infinity()};
  for (const auto dtype : {torch::kFloat, torch::kDouble, torch::kHalf, torch::kBFloat16}) {
    auto t = torch::randn({10000}).to(dtype);
    EXPECT_TRUE(keel::probe::all_finite(t)) << dtype;
    for (const int64_t at : {int64_t{0}, int64_t{4095}, int64_t{4096}, int64_t{9999}}) {
      for (const double bad : bad_values) {
        auto poisoned = t.clone();
        poisoned[at] = bad;
        EXPECT_EQ(keel::probe::all_finite(poisoned), torch::isfinite(poisoned).all().item<bool>())
            << dtype << " at " << at << " value " << bad;
        EXPECT_FALSE(keel::probe::all_finite(poisoned)) << dtype << " at " << at;
      }
    }
    // The largest finite value is finite: only an all-ones exponent is not.
    const double largest_value = dtype == torch::kHalf       ? 65504.0
                                 : dtype == torch::kBFloat16 ? 3.3895313892515355e38
                                 : dtype == torch::kFloat    ? 3.4028234663852886e38
                                                             : std::numeric_limits<double>::max();
    const auto largest = torch::full({3}, largest_value, torch::TensorOptions().dtype(torch::kDouble));
    EXPECT_TRUE(keel::probe::all_finite(largest.to(dtype))) << dtype;
  }
}

TEST(FiniteCheck, ReadsAViewAsItsValuesAndAnEmptyTensorAsFinite) {
  auto t = torch::randn({64, 64});
  t[3][7] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(keel::probe::all_finite(t.t()));
  EXPECT_TRUE(keel::probe::all_finite(t.narrow(0, 4, 10)));
  EXPECT_FALSE(keel::probe::all_finite(t.narrow(1, 7, 1)));
  EXPECT_TRUE(keel::probe::all_finite(torch::empty({0})));
}

}  // namespace
