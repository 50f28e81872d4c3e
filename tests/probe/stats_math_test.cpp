// The CUDA kernels' element and chunk math (probe/src/cuda/stats_math.hpp, chunk_plan.hpp),
// run on the CPU against float64: conversions of every bf16 and fp16 pattern, the statistics
// of special values, the fused unscale, and chunks cut across tensor boundaries and shared by
// striding "threads" as a GPU block shares them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "cuda/chunk_plan.hpp"
#include "cuda/stats_math.hpp"

namespace {

using namespace keel::probe::cuda;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// The value of a binary16 pattern, from its definition.
double half_reference(uint16_t h) {
  const int sign = (h & 0x8000) ? -1 : 1;
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  if (exponent == 0x1f) return mantissa ? std::nan("") : sign * std::numeric_limits<double>::infinity();
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);
  return sign * std::ldexp(1024 + mantissa, exponent - 25);
}

// What the statistics must be, from float64 with a compensated sum.
struct Reference {
  double sumsq = 0;
  double absmax = 0;
  uint64_t nonfinite = 0;
  uint64_t zeros = 0;
};

Reference reference_of(const std::vector<double>& values) {
  Reference r;
  long double sum = 0;
  bool nan = false;
  for (double x : values) {
    sum += static_cast<long double>(x) * x;
    if (std::isnan(x)) nan = true;
    r.absmax = std::fmax(r.absmax, std::fabs(x));
    r.nonfinite += std::isfinite(x) ? 0 : 1;
    r.zeros += x == 0 ? 1 : 0;
  }
  r.sumsq = static_cast<double>(sum);
  if (nan) r.absmax = std::nan("");
  return r;
}

void expect_matches(const GradAccumulator& acc, const Reference& ref, const char* what) {
  SCOPED_TRACE(what);
  if (std::isnan(ref.sumsq)) {
    EXPECT_TRUE(std::isnan(acc.sumsq));
  } else if (std::isinf(ref.sumsq)) {
    EXPECT_EQ(acc.sumsq, ref.sumsq);
  } else {
    EXPECT_NEAR(acc.sumsq, ref.sumsq, std::fabs(ref.sumsq) * 1e-12);   // fp64 rounding of up to 4,097 terms
  }
  if (std::isnan(ref.absmax)) {
    EXPECT_TRUE(std::isnan(acc.absmax()));
  } else {
    EXPECT_EQ(acc.absmax(), ref.absmax);
  }
  EXPECT_EQ(acc.nonfinite, ref.nonfinite);
  EXPECT_EQ(acc.zeros, ref.zeros);
}

TEST(StatsMathConversions, EveryHalfPatternWidensExactlyAndNarrowsBack) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const float f = half_to_float(static_cast<uint16_t>(h));
    const double expected = half_reference(static_cast<uint16_t>(h));
    if (std::isnan(expected)) {
      ASSERT_TRUE(std::isnan(f)) << h;
      ASSERT_TRUE(std::isnan(half_to_float(float_to_half(f)))) << h;
      continue;
    }
    ASSERT_EQ(static_cast<double>(f), expected) << h;
    ASSERT_EQ(float_to_half(f), static_cast<uint16_t>(h)) << h;
  }
}

TEST(StatsMathConversions, FloatToHalfRoundsToNearestEvenAndOverflowsToInf) {
  // Between each pair of neighbouring positive finite halves: the midpoint goes to the even
  // one, anything above it up, anything below it down.
  for (uint32_t h = 0; h < 0x7bff; ++h) {
    const double lo = half_reference(static_cast<uint16_t>(h));
    const double hi = half_reference(static_cast<uint16_t>(h + 1));
    const float mid = static_cast<float>((lo + hi) / 2);   // 12 significant bits: exact
    ASSERT_EQ(static_cast<double>(mid), (lo + hi) / 2);
    const uint16_t even = (h & 1) ? static_cast<uint16_t>(h + 1) : static_cast<uint16_t>(h);
    ASSERT_EQ(float_to_half(mid), even) << h;
    ASSERT_EQ(float_to_half(std::nextafter(mid, kInf)), h + 1) << h;
    ASSERT_EQ(float_to_half(std::nextafter(mid, 0.0f)), h) << h;
    ASSERT_EQ(float_to_half(-mid), even | 0x8000) << h;
  }
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half(std::nextafter(65520.0f, 0.0f)), 0x7bff);
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);
  EXPECT_EQ(float_to_half(1e30f), 0x7c00);
  EXPECT_EQ(float_to_half(-kInf), 0xfc00);
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -25)), 0x0000);                          // tie to even 0
  EXPECT_EQ(float_to_half(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(float_to_half(1e-10f), 0x0000);
  EXPECT_EQ(float_to_half(-0.0f), 0x8000);
}

TEST(StatsMathConversions, EveryBfloat16PatternRoundTripsAndTiesGoToEven) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const float f = bf16_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(bf16_to_float(float_to_bf16(f)))) << h;
      continue;
    }
    ASSERT_EQ(float_to_bf16(f), static_cast<uint16_t>(h)) << h;
  }
  // 1 + 2^-8 lies halfway between bf16's 1 and 1 + 2^-7: to even, 1. 1 + 3 * 2^-8: to 1 + 2^-6.
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + std::ldexp(1.0f, -8))), 1.0f);
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8))), 1.0f + std::ldexp(1.0f, -6));
  EXPECT_EQ(bf16_to_float(float_to_bf16(std::numeric_limits<float>::max())), kInf);
}

TEST(StatsMathAccumulator, SpecialValuesAgainstFloat64) {
  const std::vector<std::vector<float>> cases = {
      {},                                        // empty
      {3.5f},                                    // one element
      {0.0f, -0.0f, 0.0f},                       // zeros only
      {1.0f, kNaN, kInf, -2.0f},                 // NaN wins absmax, sum NaN
      {1.0f, kInf, -kInf, 0.0f},                 // both infinities
      {1e-40f, -1e-45f, 1e-38f},                 // fp32 subnormals: squares far below fp32's range
      {1e29f, -3e30f, 1e-30f},                   // a poisoned batch: squares above FLT_MAX
      {std::numeric_limits<float>::max(), -std::numeric_limits<float>::max()},
  };
  for (const auto& values : cases) {
    std::vector<float> data = values;
    const auto acc = grad_range<ElementType::kFloat32>(data.data(), 0, static_cast<int64_t>(data.size()), 0, 1, 1.0f);
    const Reference ref = reference_of(std::vector<double>(values.begin(), values.end()));
    expect_matches(acc, ref, ("case of " + std::to_string(values.size()) + " values").c_str());
  }
  // The two cases the fp32 sum got wrong before keel summed in fp64: both finite and nonzero.
  std::vector<float> huge = {1e29f, -3e30f};
  EXPECT_TRUE(std::isfinite(grad_range<ElementType::kFloat32>(huge.data(), 0, 2, 0, 1, 1.0f).sumsq));
  std::vector<float> tiny = {1e-30f, 1e-40f};
  EXPECT_GT(grad_range<ElementType::kFloat32>(tiny.data(), 0, 2, 0, 1, 1.0f).sumsq, 0.0);
}

TEST(StatsMathAccumulator, EveryNaNPayloadGivesTheSameAbsmaxBits) {
  // A GPU's multiply returns its own NaN pattern where x86 keeps the input's; absmax must not
  // depend on which one the data carries.
  for (uint32_t pattern : {0x7fc00000u, 0xffc00000u, 0x7fffffffu, 0x7f800001u, 0xffa5a5a5u}) {
    std::vector<float> data = {1.0f, bit_cast<float>(pattern), -2.0f};
    const auto acc = grad_range<ElementType::kFloat32>(data.data(), 0, 3, 0, 1, 1.0f);
    EXPECT_EQ(acc.absmax_bits, kNaNBits64) << std::hex << pattern;
    EXPECT_EQ(acc.nonfinite, 1u);
  }
}

TEST(StatsMathAccumulator, Bfloat16AndHalfInputsAreWidenedExactly) {
  std::vector<uint16_t> bf16, half;
  std::vector<double> bf16_values, half_values;
  for (float x : {0.0f, -0.0f, 1.5f, -3.25e20f, 7e-39f, kInf, 65504.0f, 6e-8f, -2.0f}) {
    bf16.push_back(float_to_bf16(x));
    bf16_values.push_back(bf16_to_float(bf16.back()));
    half.push_back(float_to_half(x));
    half_values.push_back(half_to_float(half.back()));
  }
  expect_matches(grad_range<ElementType::kBFloat16>(bf16.data(), 0, static_cast<int64_t>(bf16.size()), 0, 1, 1.0f),
                 reference_of(bf16_values), "bf16");
  expect_matches(grad_range<ElementType::kFloat16>(half.data(), 0, static_cast<int64_t>(half.size()), 0, 1, 1.0f),
                 reference_of(half_values), "fp16");
  std::vector<double> doubles = {1e200, -1e-300, 0.0, 2.0};   // 1e200 is finite in fp64
  const auto acc = grad_range<ElementType::kFloat64>(doubles.data(), 0, 4, 0, 1, 1.0f);
  EXPECT_EQ(acc.absmax(), 1e200);
  EXPECT_EQ(acc.nonfinite, 0u);
}

TEST(StatsMathAccumulator, UnscaleStoresTheRoundedProductAndMeasuresIt) {
  const float inv_scale = 1.0f / 65536.0f * 3.0f;   // not a power of two: the products round
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1000.0f);
  std::vector<float> fp32(1000);
  for (float& x : fp32) x = normal(rng);
  fp32[17] = kInf;
  std::vector<uint16_t> half(fp32.size()), bf16(fp32.size());
  for (size_t i = 0; i < fp32.size(); ++i) {
    half[i] = float_to_half(fp32[i]);
    bf16[i] = float_to_bf16(fp32[i]);
  }
  std::vector<float> fp32_expected(fp32.size());
  std::vector<double> fp32_values, half_values, bf16_values;
  std::vector<uint16_t> half_expected(fp32.size()), bf16_expected(fp32.size());
  for (size_t i = 0; i < fp32.size(); ++i) {
    fp32_expected[i] = fp32[i] * inv_scale;
    fp32_values.push_back(fp32_expected[i]);
    half_expected[i] = float_to_half(half_to_float(half[i]) * inv_scale);
    half_values.push_back(half_to_float(half_expected[i]));
    bf16_expected[i] = float_to_bf16(bf16_to_float(bf16[i]) * inv_scale);
    bf16_values.push_back(bf16_to_float(bf16_expected[i]));
  }
  const int64_t n = static_cast<int64_t>(fp32.size());
  expect_matches(grad_range<ElementType::kFloat32>(fp32.data(), 0, n, 0, 1, inv_scale), reference_of(fp32_values), "fp32");
  expect_matches(grad_range<ElementType::kFloat16>(half.data(), 0, n, 0, 1, inv_scale), reference_of(half_values), "fp16");
  expect_matches(grad_range<ElementType::kBFloat16>(bf16.data(), 0, n, 0, 1, inv_scale), reference_of(bf16_values), "bf16");
  EXPECT_EQ(fp32, fp32_expected);
  EXPECT_EQ(half, half_expected);
  EXPECT_EQ(bf16, bf16_expected);
}

TEST(StatsMathChunks, PlanCoversEveryTensorInOrderAndSkipsEmptyOnes) {
  const std::vector<int64_t> numels = {0, 1, 6, 7, 8, 26, 0};
  const ChunkPlan plan = plan_chunks(numels, 7);
  ASSERT_EQ(plan.tensors.size(), numels.size());
  for (size_t t = 0; t < numels.size(); ++t) {
    const auto where = plan.tensors[t];
    EXPECT_EQ(where.count, (numels[t] + 6) / 7) << t;
    int64_t covered = 0;
    for (int32_t c = where.first; c < where.first + where.count; ++c) {
      const Chunk& chunk = plan.chunks[static_cast<size_t>(c)];
      EXPECT_EQ(chunk.tensor, static_cast<int32_t>(t));
      EXPECT_EQ(chunk.begin, covered);
      EXPECT_GT(chunk.end, chunk.begin);
      EXPECT_LE(chunk.end - chunk.begin, 7);
      covered = chunk.end;
    }
    EXPECT_EQ(covered, numels[t]) << t;
  }
  EXPECT_EQ(plan.chunks.size(), 0u + 0 + 1 + 1 + 1 + 2 + 4 + 0);
  EXPECT_THROW(plan_chunks(numels, 0), std::invalid_argument);
}

// As the device runs it: each chunk shared by `threads` striding threads whose partials are
// merged, then every tensor's chunks folded in order. Counts and absmax are exact whatever the
// split; the sum of squares agrees with float64 to rounding.
TEST(StatsMathChunks, StridedThreadsAndChunkFoldsAgreeWithOnePassOverEachTensor) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  const std::vector<int64_t> numels = {1000, 0, 1, 4097, 333};
  std::vector<std::vector<float>> tensors;
  for (int64_t n : numels) {
    std::vector<float> t(static_cast<size_t>(n));
    for (float& x : t) x = uniform(rng) * std::ldexp(1.0f, static_cast<int>(rng() % 120) - 60);
    tensors.push_back(t);
  }
  tensors[0][999] = kNaN;
  tensors[3][0] = -kInf;
  tensors[3][1] = 0.0f;
  tensors[4][5] = 1e30f;
  const ChunkPlan plan = plan_chunks(numels, 256);
  const int threads = 96;   // not a divisor of the chunk: some threads get one element fewer
  std::vector<GradAccumulator> partials(plan.chunks.size());
  for (size_t c = 0; c < plan.chunks.size(); ++c) {
    const Chunk& chunk = plan.chunks[c];
    for (int thread = 0; thread < threads; ++thread) {
      partials[c].merge(grad_range<ElementType::kFloat32>(tensors[static_cast<size_t>(chunk.tensor)].data(), chunk.begin,
                                                           chunk.end, thread, threads, 1.0f));
    }
  }
  for (size_t t = 0; t < numels.size(); ++t) {
    const GradAccumulator folded = fold_chunks(partials.data(), plan.tensors[t]);
    const Reference ref = reference_of(std::vector<double>(tensors[t].begin(), tensors[t].end()));
    expect_matches(folded, ref, ("tensor " + std::to_string(t)).c_str());
  }
}

}  // namespace
