// Independent double-precision reference for the probe's metrics (DESIGN §2), computed with
// plain loops on host copies of the tensors, never with the probe's code.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace keel::test {

struct ReferenceGrad {
  double norm = 0;
  double absmax = 0;
  int64_t nonfinite = 0;
  double zero_frac = 0;
};

ReferenceGrad reference_grad(const torch::Tensor& grad);
double reference_norm(const torch::Tensor& t);
// norm(after - before) / norm(before)
double reference_update_ratio(const torch::Tensor& before, const torch::Tensor& after);

// Relative comparison that treats NaN == NaN and equal infinities as equal.
::testing::AssertionResult close_rel(double actual, double expected, double rel = 1e-5);

}  // namespace keel::test
