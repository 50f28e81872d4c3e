// The watched tensor's math (probe/src/cuda/watch_math.hpp) on the CPU against float64: the
// online log-sum-exp of a row, its special values as torch.logsumexp has them, partial rows
// merged as a GPU block merges its threads', and a whole [rows, cols] tensor of each element
// type folded as the watch kernel folds it.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "cuda/watch_math.hpp"

namespace {

using namespace keel::probe::cuda;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

double reference_lse(const std::vector<float>& row) {
  bool nan = false, pos_inf = false;
  double m = -std::numeric_limits<double>::infinity();
  for (float x : row) {
    nan = nan || std::isnan(x);
    pos_inf = pos_inf || x == kInf;
    if (std::isfinite(x)) m = std::max(m, static_cast<double>(x));
  }
  if (nan) return std::nan("");
  if (pos_inf) return std::numeric_limits<double>::infinity();
  if (std::isinf(m)) return -std::numeric_limits<double>::infinity();
  double s = 0;
  for (float x : row) {
    if (std::isfinite(x)) s += std::exp(static_cast<double>(x) - m);
  }
  return m + std::log(s);
}

RowLogSumExp lse_of(const std::vector<float>& row) {
  RowLogSumExp acc;
  for (float x : row) acc.add(x);
  return acc;
}

// As a block of `threads` threads: each takes every threads-th element, then the shares merge
// pairwise as the shuffle tree does (lane i with lane i + delta).
RowLogSumExp lse_as_block(const std::vector<float>& row, int threads) {
  std::vector<RowLogSumExp> shares(threads);
  for (size_t i = 0; i < row.size(); ++i) shares[i % threads].add(row[i]);
  for (int delta = threads / 2; delta > 0; delta /= 2) {
    for (int lane = 0; lane < delta; ++lane) shares[lane].merge(shares[lane + delta]);
  }
  return shares[0];
}

std::vector<float> logits_row(std::mt19937& rng, size_t n, float spread) {
  std::normal_distribution<float> dist(0.0f, spread);
  std::vector<float> row(n);
  for (float& x : row) x = dist(rng);
  return row;
}

TEST(WatchMath, RowLogSumExpMatchesFloat64) {
  std::mt19937 rng(3);
  for (size_t n : {1u, 7u, 256u, 50257u}) {
    for (float spread : {0.1f, 3.0f, 30.0f}) {
      const auto row = logits_row(rng, n, spread);
      const double ref = reference_lse(row);
      EXPECT_NEAR(lse_of(row).value(), ref, 1e-5 * std::max(1.0, std::fabs(ref))) << n << " " << spread;
      EXPECT_NEAR(lse_as_block(row, 256).value(), ref, 1e-5 * std::max(1.0, std::fabs(ref))) << n << " " << spread;
    }
  }
}

TEST(WatchMath, HugeFiniteValuesDoNotOverflow) {
  const std::vector<float> row = {1e30f, 1e30f, -1e30f, 3.0e38f};
  EXPECT_NEAR(lse_of(row).value(), reference_lse(row), 1e32);
  EXPECT_TRUE(std::isfinite(lse_of(row).value()));
  EXPECT_NEAR(lse_of({1e30f, 1e30f}).value(), 1e30, 1e24);
}

TEST(WatchMath, SpecialValuesAsTorchLogsumexp) {
  EXPECT_TRUE(std::isnan(lse_of({1.0f, kNaN, 2.0f}).value()));
  EXPECT_TRUE(std::isnan(lse_of({kInf, kNaN}).value())) << "NaN wins over +Inf";
  EXPECT_EQ(lse_of({1.0f, kInf}).value(), std::numeric_limits<double>::infinity());
  EXPECT_EQ(lse_of({-kInf, -kInf}).value(), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(lse_of({}).value(), -std::numeric_limits<double>::infinity());
  EXPECT_NEAR(lse_of({-kInf, 0.0f, 0.0f}).value(), std::log(2.0), 1e-7) << "-Inf adds exp(-Inf) = 0";
  // The same in shares that see only some of them.
  EXPECT_TRUE(std::isnan(lse_as_block({1.0f, 2.0f, kNaN, 3.0f, 4.0f}, 4).value()));
  EXPECT_EQ(lse_as_block({1.0f, 2.0f, 3.0f, kInf}, 4).value(), std::numeric_limits<double>::infinity());
  EXPECT_EQ(lse_as_block({-kInf}, 4).value(), -std::numeric_limits<double>::infinity()) << "empty shares merge";
}

// A [rows, cols] tensor in each element type, folded row by row as the kernel folds it,
// against float64 over the values the type holds.
template <ElementType T>
void expect_tensor_matches(const std::vector<float>& values, int64_t rows, int64_t cols) {
  using Storage = typename Element<T>::Storage;
  std::vector<Storage> data(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    if constexpr (T == ElementType::kBFloat16) {
      data[i] = float_to_bf16(values[i]);
    } else if constexpr (T == ElementType::kFloat16) {
      data[i] = float_to_half(values[i]);
    } else {
      data[i] = static_cast<Storage>(values[i]);
    }
  }
  WatchTotals totals;
  double sumsq = 0, absmax = 0, lse_sum = 0;
  uint64_t nonfinite = 0;
  for (int64_t r = 0; r < rows; ++r) {
    totals.fold(row_range<T>(data.data(), r * cols, (r + 1) * cols, 0, 1));
    std::vector<float> row;
    for (int64_t c = 0; c < cols; ++c) {
      const double x = Element<T>::load(data.data(), r * cols + c);
      row.push_back(static_cast<float>(x));
      sumsq += x * x;
      absmax = std::max(absmax, std::fabs(x));
      nonfinite += std::isfinite(x) ? 0 : 1;
    }
    lse_sum += reference_lse(row);
  }
  EXPECT_EQ(totals.rows, static_cast<uint64_t>(rows));
  EXPECT_DOUBLE_EQ(totals.values.absmax(), absmax);
  EXPECT_NEAR(totals.values.sumsq, sumsq, 1e-12 * sumsq);
  EXPECT_EQ(totals.values.nonfinite, nonfinite);
  EXPECT_NEAR(totals.lse_sum, lse_sum, 1e-5 * std::fabs(lse_sum));
}

TEST(WatchMath, EveryElementTypeFoldsAsFloat64) {
  std::mt19937 rng(11);
  const int64_t rows = 16, cols = 1000;
  const auto values = logits_row(rng, static_cast<size_t>(rows * cols), 4.0f);
  expect_tensor_matches<ElementType::kFloat32>(values, rows, cols);
  expect_tensor_matches<ElementType::kFloat64>(values, rows, cols);
  expect_tensor_matches<ElementType::kBFloat16>(values, rows, cols);
  expect_tensor_matches<ElementType::kFloat16>(values, rows, cols);
}

}  // namespace
