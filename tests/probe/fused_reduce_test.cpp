// FusedReducer against plain double-precision loops written here, independently of the kernels.
//
// Sums must agree to 1e-6 relative; absmax and counts exactly. Sizes straddle the kernel's
// lane width (16), block (1024), chunk (32K) and parallel threshold (256K elements), so tails,
// chunk merging and both the serial and the OpenMP path are exercised.

#include "keel/probe/fused_reduce.hpp"

// Counts operator new calls while enabled, to check that steady-state passes do not allocate.
#include "allocation_counter.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <random>
#include <vector>

namespace keel::probe {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr double kRelTol = 1e-6;

// ---- independent reference ------------------------------------------------------------

struct RefStats {
  double sumsq = 0;
  float absmax = 0;
  int64_t nonfinite = 0;
  int64_t zeros = 0;
};

RefStats ref_grad(const float* p, int64_t n) {
  RefStats r;
  bool any_nan = false;
  for (int64_t i = 0; i < n; ++i) {
    const double x = p[i];
    r.sumsq += x * x;
    if (std::isnan(p[i])) any_nan = true;
    if (!std::isfinite(p[i])) ++r.nonfinite;
    if (p[i] == 0.0f) ++r.zeros;
    if (!std::isnan(p[i])) r.absmax = std::max(r.absmax, std::fabs(p[i]));
  }
  if (any_nan) r.absmax = kNaN;
  return r;
}

double ref_sumsq(const float* p, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(p[i]) * p[i];
  return s;
}

double ref_update(const float* w, const float* s, int64_t n) {
  double acc = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(w[i]) - s[i];
    acc += d * d;
  }
  return acc;
}

void expect_sum_near(double actual, double expected, const std::string& what) {
  if (std::isnan(expected)) {
    EXPECT_TRUE(std::isnan(actual)) << what << ": " << actual;
  } else if (std::isinf(expected) || expected == 0) {
    EXPECT_EQ(actual, expected) << what;
  } else {
    EXPECT_LT(std::fabs(actual - expected) / expected, kRelTol)
        << what << ": got " << actual << ", want " << expected;
  }
}

void expect_matches(const GradStats& got, const RefStats& want, const std::string& what) {
  expect_sum_near(got.sumsq, want.sumsq, what + " sumsq");
  if (std::isnan(want.absmax)) {
    EXPECT_TRUE(std::isnan(got.absmax)) << what << " absmax " << got.absmax;
  } else {
    EXPECT_EQ(got.absmax, want.absmax) << what << " absmax";
    EXPECT_FALSE(std::signbit(got.absmax)) << what << " absmax is an absolute value";
  }
  EXPECT_EQ(got.nonfinite, want.nonfinite) << what << " nonfinite";
  EXPECT_EQ(got.zeros, want.zeros) << what << " zeros";
}

// Gradient-like data: magnitudes over six decades, both signs, with some +0 and -0.
std::vector<float> random_floats(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> decade(-3.0f, 3.0f);
  std::uniform_int_distribution<int> pick(0, 99);
  std::vector<float> v(n);
  for (auto& x : v) {
    const int k = pick(rng);
    x = k == 0 ? 0.0f : k == 1 ? -0.0f : normal(rng) * std::pow(10.0f, decade(rng));
  }
  return v;
}

// Bit-for-bit equality (NaN payloads and -0 included); empty vectors have null data().
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

GradStats grad_one(FusedReducer& r, const std::vector<float>& v) {
  std::vector<GradStats> out;
  r.grad_stats({ConstSpan{v.data(), static_cast<int64_t>(v.size())}}, out);
  EXPECT_EQ(out.size(), 1u);
  return out.empty() ? GradStats{} : out[0];
}

// ---- grad_stats ------------------------------------------------------------------------

TEST(FusedReduceGrad, MatchesReferenceAcrossSizes) {
  FusedReducer r;
  for (const int64_t n : {0, 1, 7, 15, 16, 17, 1023, 1024, 1025, 32767, 32768, 32769, 100003,
                          262144, 3000000}) {
    const auto v = random_floats(n, static_cast<uint32_t>(n) + 1);
    expect_matches(grad_one(r, v), ref_grad(v.data(), n), "n=" + std::to_string(n));
  }
}

TEST(FusedReduceGrad, ManySmallBuffersAtOnce) {
  // Both below and above the parallel threshold (2^20 elements), each buffer a chunk of its
  // own and many chunks to a task.
  for (const int count : {500, 4000, 20000}) {
    std::mt19937 rng(count);
    std::uniform_int_distribution<int64_t> size(0, 160);
    std::vector<std::vector<float>> bufs;
    std::vector<ConstSpan> spans;
    for (int b = 0; b < count; ++b) bufs.push_back(random_floats(size(rng), 1000 + b));
    for (const auto& v : bufs) spans.push_back({v.data(), static_cast<int64_t>(v.size())});

    FusedReducer r;
    std::vector<GradStats> out;
    r.grad_stats(spans, out);
    ASSERT_EQ(out.size(), bufs.size());
    for (size_t b = 0; b < bufs.size(); ++b) {
      expect_matches(out[b], ref_grad(bufs[b].data(), bufs[b].size()),
                     "count=" + std::to_string(count) + " buffer " + std::to_string(b));
    }
  }
}

TEST(FusedReduceGrad, MixedLargeAndSmallBuffersStayApart) {
  // A large buffer split into many chunks between small ones: partials must go to the right
  // buffer. The NaN sits in a middle chunk of the large one only.
  auto big = random_floats(1'000'003, 7);
  big[500'000] = kNaN;
  const auto small_a = random_floats(33, 8);
  const auto small_b = random_floats(70'000, 9);
  const std::vector<float> empty;
  std::vector<ConstSpan> spans = {{small_a.data(), 33},
                                  {big.data(), static_cast<int64_t>(big.size())},
                                  {empty.data(), 0},
                                  {small_b.data(), 70'000}};
  FusedReducer r;
  std::vector<GradStats> out;
  r.grad_stats(spans, out);
  ASSERT_EQ(out.size(), 4u);
  expect_matches(out[0], ref_grad(small_a.data(), 33), "small_a");
  expect_matches(out[1], ref_grad(big.data(), big.size()), "big");
  expect_matches(out[2], RefStats{}, "empty");
  expect_matches(out[3], ref_grad(small_b.data(), 70'000), "small_b");
  EXPECT_TRUE(std::isnan(out[1].absmax));
  EXPECT_FALSE(std::isnan(out[3].absmax));
}

TEST(FusedReduceGrad, NaNAnywhereMakesAbsmaxNaN) {
  FusedReducer r;
  for (const int64_t n : {1, 17, 1025, 100003}) {
    for (const int64_t pos : {int64_t{0}, n / 2, n - 1}) {
      auto v = random_floats(n, 3);
      v[pos] = kNaN;
      if (n > 2) v[(pos + 1) % n] = kInf;  // NaN must win over Inf
      if (n > 3) v[(pos + 2) % n] = -3e38f;
      const GradStats s = grad_one(r, v);
      const std::string what = "n=" + std::to_string(n) + " pos=" + std::to_string(pos);
      EXPECT_TRUE(std::isnan(s.absmax)) << what;
      EXPECT_TRUE(std::isnan(s.sumsq)) << what;
      expect_matches(s, ref_grad(v.data(), n), what);
    }
  }
}

TEST(FusedReduceGrad, NegativeNaNIsNaN) {
  std::vector<float> v(40, 1.0f);
  v[21] = -kNaN;
  FusedReducer r;
  const GradStats s = grad_one(r, v);
  EXPECT_TRUE(std::isnan(s.absmax));
  EXPECT_EQ(s.nonfinite, 1);
}

TEST(FusedReduceGrad, InfinitiesOnly) {
  std::vector<float> v(1000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = i % 3 == 0 ? -kInf : kInf;
  FusedReducer r;
  const GradStats s = grad_one(r, v);
  EXPECT_EQ(s.absmax, kInf);
  EXPECT_EQ(s.nonfinite, 1000);
  EXPECT_EQ(s.zeros, 0);
  EXPECT_EQ(s.sumsq, std::numeric_limits<double>::infinity());
}

TEST(FusedReduceGrad, SingleNegativeInfAmongFinite) {
  auto v = random_floats(5000, 11);
  v[4321] = -kInf;
  FusedReducer r;
  const GradStats s = grad_one(r, v);
  EXPECT_EQ(s.absmax, kInf);
  EXPECT_EQ(s.nonfinite, 1);
  expect_matches(s, ref_grad(v.data(), v.size()), "one -inf");
}

TEST(FusedReduceGrad, AllZerosAndNegativeZeros) {
  FusedReducer r;
  for (const float zero : {0.0f, -0.0f}) {
    const std::vector<float> v(70'001, zero);
    const GradStats s = grad_one(r, v);
    EXPECT_EQ(s.zeros, 70'001) << "zero=" << zero;
    EXPECT_EQ(s.sumsq, 0.0);
    EXPECT_EQ(s.absmax, 0.0f);
    EXPECT_FALSE(std::signbit(s.absmax));
    EXPECT_EQ(s.nonfinite, 0);
  }
}

TEST(FusedReduceGrad, DenormalsAreNeitherZeroNorLost) {
  const float tiny = std::numeric_limits<float>::denorm_min();
  std::vector<float> v(3000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = (i % 2 ? -1.0f : 1.0f) * tiny * (i + 1);
  FusedReducer r;
  const GradStats s = grad_one(r, v);
  EXPECT_EQ(s.zeros, 0);
  EXPECT_EQ(s.nonfinite, 0);
  EXPECT_EQ(s.absmax, tiny * 3000);
  // Their fp32 squares underflow to 0; the fp64 fallback keeps the sum exact.
  expect_sum_near(s.sumsq, ref_sumsq(v.data(), v.size()), "denormals");
  EXPECT_GT(s.sumsq, 0.0);

  // Next to normal values they still count, and the sum stays accurate.
  auto mixed = random_floats(3000, 12);
  for (size_t i = 0; i < mixed.size(); i += 3) mixed[i] = tiny * (i + 1);
  expect_matches(grad_one(r, mixed), ref_grad(mixed.data(), mixed.size()), "mixed denormals");
}

TEST(FusedReduceGrad, ManyEqualValuesKeepPrecision) {
  // A single fp32 accumulator (or lanes without the fp64 block sums) drifts by far more than
  // 1e-6 over millions of equal terms.
  const std::vector<float> v(int64_t{1} << 22, 0.1f);
  FusedReducer r;
  expect_sum_near(grad_one(r, v).sumsq, ref_sumsq(v.data(), v.size()), "4M x 0.1");
}

TEST(FusedReduceGrad, OutputIsResizedAndReusedAcrossCalls) {
  FusedReducer r;
  const auto a = random_floats(600'000, 21);
  const auto b = random_floats(10, 22);
  std::vector<GradStats> out(7, GradStats{1, 1, 1, 1});
  r.grad_stats({{a.data(), 300'000}, {a.data() + 300'000, 300'000}}, out);
  ASSERT_EQ(out.size(), 2u);
  expect_matches(out[1], ref_grad(a.data() + 300'000, 300'000), "second half");
  // Fewer chunks than before: stale partials from the larger call must not leak in.
  r.grad_stats({{b.data(), 10}}, out);
  ASSERT_EQ(out.size(), 1u);
  expect_matches(out[0], ref_grad(b.data(), 10), "after shrink");
  r.grad_stats({}, out);
  EXPECT_TRUE(out.empty());
}

// ---- unscale_and_grad_stats -----------------------------------------------------------

TEST(FusedReduceUnscale, ScalesInPlaceAndReportsUnscaledStats) {
  FusedReducer r;
  for (const float scale : {1.0f / 65536.0f, 0.37f, 3.0f}) {
    for (const int64_t n : {0, 5, 1025, 300'001}) {
      const auto original = random_floats(n, 31 + static_cast<uint32_t>(n));
      auto data = original;
      std::vector<float> expected(n);
      for (int64_t i = 0; i < n; ++i) expected[i] = original[i] * scale;

      std::vector<GradStats> out;
      r.unscale_and_grad_stats({MutableSpan{data.data(), n}}, scale, out);
      ASSERT_EQ(out.size(), 1u);
      const std::string what = "scale=" + std::to_string(scale) + " n=" + std::to_string(n);
      EXPECT_TRUE(same_bits(data, expected)) << what;
      expect_matches(out[0], ref_grad(expected.data(), n), what);
    }
  }
}

TEST(FusedReduceUnscale, NonFiniteAfterScalingIsCounted) {
  std::vector<float> v(100, 1.0f);
  v[3] = 3e38f;   // overflows to +Inf when scaled by 2
  v[50] = kNaN;   // stays NaN
  v[70] = -kInf;  // stays -Inf
  v[90] = 0.0f;
  FusedReducer r;
  std::vector<GradStats> out;
  r.unscale_and_grad_stats({MutableSpan{v.data(), 100}}, 2.0f, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(v[3], kInf);
  EXPECT_EQ(v[0], 2.0f);
  EXPECT_EQ(out[0].nonfinite, 3);
  EXPECT_EQ(out[0].zeros, 1);
  EXPECT_TRUE(std::isnan(out[0].absmax));
}

TEST(FusedReduceUnscale, ManyBuffers) {
  std::vector<std::vector<float>> bufs, expected;
  std::vector<MutableSpan> spans;
  for (int b = 0; b < 300; ++b) {
    bufs.push_back(random_floats(b * 37 % 4000, 500 + b));
    expected.push_back(bufs.back());
    for (auto& x : expected.back()) x *= 0.25f;
  }
  for (auto& v : bufs) spans.push_back({v.data(), static_cast<int64_t>(v.size())});
  FusedReducer r;
  std::vector<GradStats> out;
  r.unscale_and_grad_stats(spans, 0.25f, out);
  ASSERT_EQ(out.size(), bufs.size());
  for (size_t b = 0; b < bufs.size(); ++b) {
    ASSERT_TRUE(same_bits(bufs[b], expected[b])) << "buffer " << b;
    expect_matches(out[b], ref_grad(expected[b].data(), expected[b].size()),
                   "buffer " + std::to_string(b));
  }
}

// ---- grad_and_weight_stats --------------------------------------------------------------

// The gradients' statistics and the weights' norms of one pass are those of the two passes
// apart, with the unscale and without, across the serial and the parallel path (the last
// buffer takes the total past the parallel threshold).
TEST(FusedReduceGradAndWeight, OnePassGivesWhatTheTwoPassesGive) {
  for (const float scale : {1.0f, 0.25f}) {
    SCOPED_TRACE("scale " + std::to_string(scale));
    std::vector<std::vector<float>> grads, weights, expected;
    for (int b = 0; b < 120; ++b) {
      const size_t n = b == 119 ? (size_t{1} << 21) : static_cast<size_t>(b * 53 % 5000);
      grads.push_back(random_floats(n, 700 + b));
      weights.push_back(random_floats(n, 900 + b));
      expected.push_back(grads.back());
      for (auto& x : expected.back()) x *= scale;
    }
    std::vector<MutableSpan> grad_spans;
    std::vector<ConstSpan> weight_spans;
    for (size_t b = 0; b < grads.size(); ++b) {
      grad_spans.push_back({grads[b].data(), static_cast<int64_t>(grads[b].size())});
      weight_spans.push_back({weights[b].data(), static_cast<int64_t>(weights[b].size())});
    }
    FusedReducer r;
    std::vector<GradStats> out;
    std::vector<double> weight_out;
    r.grad_and_weight_stats(grad_spans, scale, weight_spans, out, weight_out);
    ASSERT_EQ(out.size(), grads.size());
    ASSERT_EQ(weight_out.size(), grads.size());
    std::vector<double> weights_apart;
    r.sumsq(weight_spans, weights_apart);
    for (size_t b = 0; b < grads.size(); ++b) {
      SCOPED_TRACE("buffer " + std::to_string(b));
      ASSERT_TRUE(same_bits(grads[b], expected[b]));
      expect_matches(out[b], ref_grad(expected[b].data(), expected[b].size()), "gradient");
      EXPECT_EQ(weight_out[b], weights_apart[b]);
      expect_sum_near(weight_out[b], ref_sumsq(weights[b].data(), weights[b].size()), "weight");
    }
  }
}

// ---- snapshot_sumsq / update_and_snapshot / sumsq --------------------------------------------

TEST(FusedReduceSnapshot, CopiesBitExactlyAndSumsSquares) {
  auto w1 = random_floats(400'003, 41);
  w1[7] = -0.0f;
  w1[8] = std::numeric_limits<float>::denorm_min();
  const auto w2 = random_floats(17, 42);
  const std::vector<float> w3;
  std::vector<float> s1(w1.size(), 9.0f), s2(w2.size(), 9.0f), s3;
  FusedReducer r;
  std::vector<double> out;
  r.snapshot_sumsq({{w1.data(), s1.data(), static_cast<int64_t>(w1.size())},
                    {w2.data(), s2.data(), static_cast<int64_t>(w2.size())},
                    {w3.data(), s3.data(), 0}},
                   out);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_TRUE(same_bits(s1, w1));
  EXPECT_TRUE(same_bits(s2, w2));
  expect_sum_near(out[0], ref_sumsq(w1.data(), w1.size()), "w1");
  expect_sum_near(out[1], ref_sumsq(w2.data(), w2.size()), "w2");
  EXPECT_EQ(out[2], 0.0);
}

TEST(FusedReduceSnapshot, CopiesNaNPayloadsUnchanged) {
  std::vector<float> w(64, 1.0f);
  const uint32_t payload_nan = 0xffc01234u;  // negative quiet NaN with a payload
  std::memcpy(&w[33], &payload_nan, sizeof payload_nan);
  std::vector<float> s(64);
  FusedReducer r;
  std::vector<double> out;
  r.snapshot_sumsq({{w.data(), s.data(), 64}}, out);
  uint32_t copied;
  std::memcpy(&copied, &s[33], sizeof copied);
  EXPECT_EQ(copied, payload_nan);
  EXPECT_TRUE(std::isnan(out[0]));
}

TEST(FusedReduceUpdate, SumsSquaredDifferenceAndRollsTheSnapshot) {
  FusedReducer r;
  for (const int64_t n : {0, 1, 1025, 100003, 600'000}) {
    const auto before = random_floats(n, 51 + static_cast<uint32_t>(n));
    auto after = before;
    std::mt19937 rng(52);
    std::normal_distribution<float> step(0.0f, 1e-3f);
    for (auto& x : after) x += step(rng) * (std::fabs(x) + 1e-3f);
    auto snapshot = before;
    std::vector<double> update, weight;
    r.update_and_snapshot({{after.data(), snapshot.data(), n}}, update, weight);
    ASSERT_EQ(update.size(), 1u);
    ASSERT_EQ(weight.size(), 1u);
    expect_sum_near(update[0], ref_update(after.data(), before.data(), n), "n=" + std::to_string(n));
    expect_sum_near(weight[0], ref_sumsq(after.data(), n), "n=" + std::to_string(n));
    EXPECT_EQ(snapshot, after) << "n=" << n;
  }
}

TEST(FusedReduceUpdate, UnchangedWeightsGiveZero) {
  const auto w = random_floats(50'000, 61);
  auto snapshot = w;
  FusedReducer r;
  std::vector<double> update, weight;
  r.update_and_snapshot({{w.data(), snapshot.data(), 50'000}}, update, weight);
  EXPECT_EQ(update[0], 0.0);
}

TEST(FusedReduceSumsq, MatchesReference) {
  FusedReducer r;
  std::vector<std::vector<float>> bufs;
  for (const int64_t n : {0, 1, 7, 1023, 1024, 1025, 100003, 3000000}) {
    bufs.push_back(random_floats(n, 71 + static_cast<uint32_t>(n)));
  }
  std::vector<ConstSpan> spans;
  for (const auto& v : bufs) spans.push_back({v.data(), static_cast<int64_t>(v.size())});
  std::vector<double> out;
  r.sumsq(spans, out);
  ASSERT_EQ(out.size(), bufs.size());
  for (size_t b = 0; b < bufs.size(); ++b) {
    expect_sum_near(out[b], ref_sumsq(bufs[b].data(), bufs[b].size()),
                    "n=" + std::to_string(bufs[b].size()));
  }
}

// ---- the range of float32: no overflow for finite input, no tiny layer lost -------------------

// Finite values whose squares overflow fp32 (|x| > 1.8e19), up to FLT_MAX, both signs, among
// ordinary ones; every `stride`-th element is huge.
std::vector<float> with_huge_values(int64_t n, int64_t stride, uint32_t seed) {
  auto v = random_floats(n, seed);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> exponent(19.5f, 38.5f);
  for (int64_t i = 0; i < n; i += stride) {
    const float x = std::min(std::pow(10.0f, exponent(rng)), std::numeric_limits<float>::max());
    v[i] = (i / stride) % 2 ? -x : x;
  }
  return v;
}

TEST(FusedReduceRange, HugeFiniteGradientsGiveFiniteExactSums) {
  FusedReducer r;
  for (const int64_t n : {1, 17, 1025, 40'000, 300'001}) {
    for (const int64_t stride : {int64_t{1}, int64_t{1000}}) {
      const auto v = with_huge_values(n, stride, 81 + static_cast<uint32_t>(n + stride));
      const std::string what = "n=" + std::to_string(n) + " stride=" + std::to_string(stride);
      const GradStats got = grad_one(r, v);
      EXPECT_TRUE(std::isfinite(got.sumsq)) << what;
      expect_matches(got, ref_grad(v.data(), n), what);
    }
  }
  // The largest float squared, many times over, is still far inside fp64.
  const std::vector<float> max_everywhere(70'000, std::numeric_limits<float>::max());
  expect_sum_near(grad_one(r, max_everywhere).sumsq, ref_sumsq(max_everywhere.data(), 70'000), "FLT_MAX x 70000");
}

TEST(FusedReduceRange, UnscaledHugeGradientsToo) {
  const auto original = with_huge_values(5000, 3, 91);
  auto data = original;
  const float scale = 1.0f / 65536.0f;   // leaves values up to 5e33: their squares still overflow
  std::vector<float> expected(original.size());
  for (size_t i = 0; i < original.size(); ++i) expected[i] = original[i] * scale;
  FusedReducer r;
  std::vector<GradStats> out;
  r.unscale_and_grad_stats({MutableSpan{data.data(), 5000}}, scale, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(same_bits(data, expected));
  expect_matches(out[0], ref_grad(expected.data(), 5000), "unscaled");
}

TEST(FusedReduceRange, HugeWeightsAndUpdatesGiveFiniteExactSums) {
  const auto w = with_huge_values(3000, 7, 93);
  // Snapshot of the opposite sign: w - s reaches 2 x FLT_MAX, which fp32 cannot hold either.
  std::vector<float> old(w.size());
  for (size_t i = 0; i < w.size(); ++i) old[i] = -w[i];
  FusedReducer r;
  std::vector<double> sums;
  r.sumsq({{w.data(), 3000}}, sums);
  expect_sum_near(sums[0], ref_sumsq(w.data(), 3000), "sumsq");

  std::vector<float> snap(w.size());
  r.snapshot_sumsq({{w.data(), snap.data(), 3000}}, sums);
  expect_sum_near(sums[0], ref_sumsq(w.data(), 3000), "snapshot");
  EXPECT_TRUE(same_bits(snap, w));

  auto rolling = old;
  std::vector<double> update, weight;
  r.update_and_snapshot({{w.data(), rolling.data(), 3000}}, update, weight);
  EXPECT_TRUE(std::isfinite(update[0]));
  expect_sum_near(update[0], ref_update(w.data(), old.data(), 3000), "update");
  expect_sum_near(weight[0], ref_sumsq(w.data(), 3000), "update's weight");
  EXPECT_TRUE(same_bits(rolling, w)) << "the snapshot rolls forward after the fallback too";
}

TEST(FusedReduceRange, TinyLayersAreNotLost) {
  // Squares of 1e-25 are 1e-50: zero in fp32, a normal number in fp64.
  FusedReducer r;
  for (const int64_t n : {1, 1025, 300'001}) {
    std::vector<float> v(n);
    for (int64_t i = 0; i < n; ++i) v[i] = (i % 2 ? -1e-25f : 3e-24f) * (1.0f + float(i % 7));
    const std::string what = "n=" + std::to_string(n);
    const GradStats got = grad_one(r, v);
    EXPECT_GT(got.sumsq, 0.0) << what;
    expect_matches(got, ref_grad(v.data(), n), what);
    std::vector<double> sums;
    r.sumsq({{v.data(), n}}, sums);
    expect_sum_near(sums[0], ref_sumsq(v.data(), n), what + " sumsq");
  }
}

TEST(FusedReduceRange, TinyValuesAmongZerosAreNotLost) {
  // A block of zeros needs no fp64 pass (its sum is exactly 0), but one tiny value among the
  // zeros makes the block's fp32 sum 0 as well: that block must still be summed in fp64.
  FusedReducer r;
  for (const int64_t at : {int64_t{0}, int64_t{700}, int64_t{1500}}) {
    std::vector<float> w(2048, 0.0f);
    w[at] = 2e-25f;
    const std::string what = "tiny value at " + std::to_string(at);
    const double tiny = double(2e-25f) * double(2e-25f);
    std::vector<double> sums;
    r.sumsq({{w.data(), 2048}}, sums);
    EXPECT_DOUBLE_EQ(sums[0], tiny) << what;

    std::vector<float> snapshot(2048, 0.0f);
    std::vector<double> update, weight;
    r.update_and_snapshot({{w.data(), snapshot.data(), 2048}}, update, weight);
    EXPECT_DOUBLE_EQ(update[0], tiny) << what << ": the update, from a snapshot of zeros";
    EXPECT_DOUBLE_EQ(weight[0], tiny) << what << ": the weights";
    r.update_and_snapshot({{w.data(), snapshot.data(), 2048}}, update, weight);
    EXPECT_EQ(update[0], 0.0) << what << ": unmoved weights";
    EXPECT_DOUBLE_EQ(weight[0], tiny) << what;
  }
}

// ---- logsumexp rows ----------------------------------------------------------------------

double ref_logsumexp_rows_sum(const std::vector<float>& v, int64_t rows, int64_t cols) {
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t c = 0; c < cols; ++c) m = std::max(m, static_cast<double>(v[r * cols + c]));
    double s = 0;
    for (int64_t c = 0; c < cols; ++c) s += std::exp(static_cast<double>(v[r * cols + c]) - m);
    total += m + std::log(s);
  }
  return total;
}

TEST(FusedReduceLogsumexp, MatchesReferenceForManyShapes) {
  FusedReducer r;
  const std::vector<std::pair<int64_t, int64_t>> shapes{{1, 1}, {3, 7}, {5, 16}, {9, 17}, {512, 76}, {40, 50257},
                                                        {7000, 40}};
  for (const auto& [rows, cols] : shapes) {
    auto v = random_floats(static_cast<size_t>(rows * cols), static_cast<unsigned>(rows + cols));
    for (auto& x : v) x *= 30.0f;   // wide logits: exp arguments down to the underflow range
    const double expected = ref_logsumexp_rows_sum(v, rows, cols);
    const double actual = r.logsumexp_rows_sum(v.data(), rows, cols);
    EXPECT_NEAR(actual, expected, 1e-6 * std::max(1.0, std::fabs(expected))) << rows << "x" << cols;
  }
}

TEST(FusedReduceLogsumexp, EmptyIsZero) {
  FusedReducer r;
  EXPECT_EQ(r.logsumexp_rows_sum(nullptr, 0, 5), 0.0);
}

// ---- steady state ----------------------------------------------------------------------

TEST(FusedReduceSteadyState, RepeatedPassesDoNotAllocate) {
  // Large enough for the parallel path, with many chunks and small buffers.
  std::vector<std::vector<float>> w, s;
  for (int b = 0; b < 50; ++b) {
    w.push_back(random_floats(b % 5 == 0 ? 100'000 : 300, 80 + b));
    s.push_back(std::vector<float>(w.back().size()));
  }
  std::vector<ConstSpan> cspans;
  std::vector<MutableSpan> mspans;
  std::vector<SnapshotSpan> snaps;
  std::vector<SnapshotSpan> updates;
  for (size_t b = 0; b < w.size(); ++b) {
    const auto n = static_cast<int64_t>(w[b].size());
    cspans.push_back({w[b].data(), n});
    mspans.push_back({w[b].data(), n});
    snaps.push_back({w[b].data(), s[b].data(), n});
    updates.push_back({w[b].data(), s[b].data(), n});
  }
  FusedReducer r;
  std::vector<GradStats> gout;
  std::vector<double> dout, dout2;
  auto all_passes = [&] {
    r.grad_stats(cspans, gout);
    r.unscale_and_grad_stats(mspans, 1.0f, gout);
    r.snapshot_sumsq(snaps, dout);
    r.update_and_snapshot(updates, dout, dout2);
    r.sumsq(cspans, dout);
  };
  all_passes();  // first call sizes the scratch and starts the OpenMP pool

  keel::test::all_allocations = 0;
  keel::test::count_all = true;
  all_passes();
  all_passes();
  keel::test::count_all = false;
  EXPECT_EQ(keel::test::all_allocations.load(), 0);
}

}  // namespace
}  // namespace keel::probe
