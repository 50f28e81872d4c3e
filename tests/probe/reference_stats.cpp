#include "reference_stats.hpp"

#include <cmath>
#include <limits>

namespace keel::test {
namespace {
std::vector<double> host_doubles(const torch::Tensor& t) {
  auto d = t.detach().to(torch::kCPU).to(torch::kDouble).contiguous().view({-1});
  return std::vector<double>(d.data_ptr<double>(), d.data_ptr<double>() + d.numel());
}
}  // namespace

ReferenceGrad reference_grad(const torch::Tensor& grad) {
  ReferenceGrad r;
  const auto v = host_doubles(grad);
  double sum = 0;
  bool nan = false;
  for (double x : v) {
    sum += x * x;
    if (std::isnan(x)) nan = true;
    if (!std::isfinite(x)) ++r.nonfinite;
    if (x == 0.0) r.zero_frac += 1;
    if (!std::isnan(x)) r.absmax = std::max(r.absmax, std::fabs(x));
  }
  if (nan) r.absmax = std::numeric_limits<double>::quiet_NaN();
  r.norm = std::sqrt(sum);
  r.zero_frac = v.empty() ? 0 : r.zero_frac / static_cast<double>(v.size());
  return r;
}

double reference_norm(const torch::Tensor& t) {
  double sum = 0;
  for (double x : host_doubles(t)) sum += x * x;
  return std::sqrt(sum);
}

double reference_update_ratio(const torch::Tensor& before, const torch::Tensor& after) {
  const auto b = host_doubles(before);
  const auto a = host_doubles(after);
  double diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff += (a[i] - b[i]) * (a[i] - b[i]);
  return std::sqrt(diff) / reference_norm(before);
}

::testing::AssertionResult close_rel(double actual, double expected, double rel) {
  if (std::isnan(expected) && std::isnan(actual)) return ::testing::AssertionSuccess();
  if (std::isinf(expected) && actual == expected) return ::testing::AssertionSuccess();
  const double tolerance = rel * std::max(std::fabs(expected), 1e-30);
  if (std::fabs(actual - expected) <= tolerance) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "actual " << actual << " vs expected " << expected
                                       << " (relative error " << std::fabs(actual - expected) / std::fabs(expected)
                                       << ")";
}

}  // namespace keel::test
