// stats_math: the per-element and per-chunk arithmetic of the probe's multi-tensor CUDA
// kernels, in functions that also compile for the host so CPU tests can check them. (The CPU
// backend's own kernels are fused_reduce.cpp, held to the same float64 reference.)
//
// What it is for: the CUDA kernels (multi_tensor_stats.cu) call exactly these functions, and the
// CPU tests (tests/probe/stats_math_test.cpp) check them against float64 on machines with no
// GPU. Nothing here includes CUDA or torch headers; under nvcc every function is
// __host__ __device__.
//
// The numbers, per tensor, from one read of it (the gradient pass):
// - sum of squares, accumulated in fp64 from the element widened to fp64. Every finite fp32,
//   bf16 or fp16 value squares to a finite, normal double, so the sum neither overflows (a
//   poisoned batch near 1e29) nor loses a layer whose values are all below 1e-19. fp64 input
//   is exact up to |x| = 1.3e154. NaN or Inf input makes the sum NaN or Inf.
//   Why fp64 on a GPU: the pass is bound by memory bandwidth by a wide margin. An H100 reads
//   0.7e12 fp32 values a second (2.9 TB/s) and does 34e12 fp64 FMAs. A consumer card with
//   1/64-rate fp64 still does about 2.5x what its bandwidth feeds it.
// - absmax as the bit pattern of |x| widened to fp64: for non-negative doubles the integer order
//   of the bits is the numeric order, with NaN above +Inf above every finite value. The max of
//   the bits is NaN when any element is NaN, which is keel's definition of grad_absmax. A NaN
//   is recorded as the one quiet NaN pattern: the payload a NaN carries differs between the
//   host and the device (x86 keeps the input's, a GPU's multiply returns its own canonical
//   NaN), and the results must not.
// - the count of non-finite elements and of elements exactly zero (+0 or -0).
// The loss-scaler unscale (x * inv_scale, in fp32 as PyTorch's
// _amp_foreach_non_finite_check_and_unscale_ does) is fused in. The product is rounded back to
// the tensor's type, and the statistics are taken of the stored value, which is the value the
// optimizer will read.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define KEEL_HD __host__ __device__ __forceinline__
#else
#define KEEL_HD inline
#endif

namespace keel::probe::cuda {

// The element types the kernels read. The values are part of the chunk table's layout.
enum class ElementType : int32_t { kFloat32 = 0, kFloat64 = 1, kBFloat16 = 2, kFloat16 = 3 };

// ---------------------------------------------------------------------------------------
// Bit casts and conversions (no cuda_fp16.h / cuda_bf16.h, so the host sees the same code)
// ---------------------------------------------------------------------------------------

// memcpy is the portable bit cast on both sides: nvcc turns a 4- or 8-byte one into a move.
template <typename To, typename From>
KEEL_HD To bit_cast(From x) {
  static_assert(sizeof(To) == sizeof(From), "bit_cast between types of one size");
  To out;
  std::memcpy(&out, &x, sizeof out);
  return out;
}

KEEL_HD uint64_t double_bits(double x) { return bit_cast<uint64_t>(x); }
KEEL_HD double double_from_bits(uint64_t b) { return bit_cast<double>(b); }
KEEL_HD uint32_t float_bits(float x) { return bit_cast<uint32_t>(x); }
KEEL_HD float float_from_bits(uint32_t b) { return bit_cast<float>(b); }

// bfloat16 is the top half of a float32: widening is exact.
KEEL_HD float bf16_to_float(uint16_t h) { return float_from_bits(static_cast<uint32_t>(h) << 16); }

// float32 -> bfloat16, round to nearest even; NaN stays NaN (quiet), Inf stays Inf.
KEEL_HD uint16_t float_to_bf16(float x) {
  const uint32_t b = float_bits(x);
  if ((b & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((b >> 16) | 0x0040u);
  const uint32_t rounding = 0x7fffu + ((b >> 16) & 1u);
  return static_cast<uint16_t>((b + rounding) >> 16);
}

// IEEE binary16 -> float32, exact for every pattern (subnormals, Inf, NaN payloads kept).
KEEL_HD float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1fu) return float_from_bits(sign | 0x7f800000u | (mantissa << 13));
  if (exponent != 0) return float_from_bits(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  if (mantissa == 0) return float_from_bits(sign);
  // Subnormal half: m * 2^-24, exact in float32 as a normal number.
  int32_t e = 113;   // exponent of 2^-14 in float32's bias, before normalising
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    --e;
  }
  return float_from_bits(sign | (static_cast<uint32_t>(e) << 23) | ((mantissa & 0x3ffu) << 13));
}

// float32 -> IEEE binary16, round to nearest even, overflow to Inf, gradual underflow; NaN stays
// NaN (quiet). The same result as CUDA's __float2half_rn and as torch's .to(kHalf).
KEEL_HD uint16_t float_to_half(float x) {
  const uint32_t b = float_bits(x);
  const uint16_t sign = static_cast<uint16_t>((b >> 16) & 0x8000u);
  const uint32_t a = b & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);   // rounds to >= 65520: Inf
  if (a >= 0x38800000u) {   // normal half (>= 2^-14)
    const uint32_t rounded = a + 0xfffu + ((a >> 13) & 1u);
    return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
  }
  if (a < 0x33000000u) return sign;   // below half the smallest subnormal (2^-25): +-0
  // Subnormal half: the value in units of 2^-24, rounded to nearest even.
  const uint32_t exponent = a >> 23;                      // 102..112
  const uint32_t mantissa = (a & 0x7fffffu) | 0x800000u;  // 24 significant bits
  const uint32_t shift = 126u - exponent;                  // 14..24
  const uint32_t kept = mantissa >> shift;
  const uint32_t rest = mantissa & ((1u << shift) - 1u);
  const uint32_t half_way = 1u << (shift - 1u);
  const uint32_t up = rest > half_way || (rest == half_way && (kept & 1u));
  return static_cast<uint16_t>(sign | (kept + up));
}

// ---------------------------------------------------------------------------------------
// Elements
// ---------------------------------------------------------------------------------------

// Load widens to fp64; store_unscaled multiplies in fp32 (fp64 for fp64 tensors), stores in
// the tensor's type and returns the stored value widened.
template <ElementType T>
struct Element;

// fp32 and fp64: the product in the tensor's own type (inv_scale widens exactly to fp64).
template <typename F>
struct NativeElement {
  using Storage = F;
  static KEEL_HD double load(const Storage* p, int64_t i) { return p[i]; }
  static KEEL_HD double store_unscaled(Storage* p, int64_t i, float inv_scale) {
    const F v = p[i] * static_cast<F>(inv_scale);
    p[i] = v;
    return v;
  }
};

template <>
struct Element<ElementType::kFloat32> : NativeElement<float> {};

template <>
struct Element<ElementType::kFloat64> : NativeElement<double> {};

// bf16 and fp16: the product in fp32, rounded to the tensor's type, measured as stored.
struct Bf16Format {
  static KEEL_HD float widen(uint16_t h) { return bf16_to_float(h); }
  static KEEL_HD uint16_t narrow(float x) { return float_to_bf16(x); }
};

struct HalfFormat {
  static KEEL_HD float widen(uint16_t h) { return half_to_float(h); }
  static KEEL_HD uint16_t narrow(float x) { return float_to_half(x); }
};

template <typename Format>
struct Packed16Element {
  using Storage = uint16_t;
  static KEEL_HD double load(const Storage* p, int64_t i) { return Format::widen(p[i]); }
  static KEEL_HD double store_unscaled(Storage* p, int64_t i, float inv_scale) {
    const uint16_t v = Format::narrow(Format::widen(p[i]) * inv_scale);
    p[i] = v;
    return Format::widen(v);
  }
};

template <>
struct Element<ElementType::kBFloat16> : Packed16Element<Bf16Format> {};

template <>
struct Element<ElementType::kFloat16> : Packed16Element<HalfFormat> {};

// ---------------------------------------------------------------------------------------
// Accumulation
// ---------------------------------------------------------------------------------------

constexpr uint64_t kAbsMask64 = 0x7fffffffffffffffull;
constexpr uint64_t kInfBits64 = 0x7ff0000000000000ull;   // smallest non-finite |pattern|
constexpr uint64_t kNaNBits64 = 0x7ff8000000000000ull;   // the quiet NaN absmax records

// Running statistics of a set of elements; merge() is associative and commutative for every
// field but sumsq, whose fp64 rounding depends on the order (the fold order is fixed, so
// results repeat bit for bit from run to run).
struct GradAccumulator {
  double sumsq = 0;
  uint64_t absmax_bits = 0;   // |x| as fp64 bits; see the header comment
  uint64_t nonfinite = 0;
  uint64_t zeros = 0;

  KEEL_HD void add(double x) {
    const uint64_t magnitude = double_bits(x) & kAbsMask64;
    const uint64_t a = magnitude > kInfBits64 ? kNaNBits64 : magnitude;
    sumsq += x * x;
    absmax_bits = a > absmax_bits ? a : absmax_bits;
    nonfinite += a >= kInfBits64 ? 1u : 0u;
    zeros += a == 0 ? 1u : 0u;
  }

  KEEL_HD void merge(const GradAccumulator& other) {
    sumsq += other.sumsq;
    absmax_bits = other.absmax_bits > absmax_bits ? other.absmax_bits : absmax_bits;
    nonfinite += other.nonfinite;
    zeros += other.zeros;
  }

  KEEL_HD double absmax() const { return double_from_bits(absmax_bits); }
};

// Statistics of elements [begin, end) of one tensor, one element every `stride` starting at
// begin + offset: a GPU thread's share of a chunk (offset = thread index, stride = threads),
// or the whole range on the host (offset 0, stride 1). With inv_scale != 1 each element is
// unscaled in place first.
template <ElementType T>
KEEL_HD GradAccumulator grad_range(typename Element<T>::Storage* data, int64_t begin, int64_t end,
                                   int64_t offset, int64_t stride, float inv_scale) {
  GradAccumulator acc;
  if (inv_scale == 1.0f) {
    for (int64_t i = begin + offset; i < end; i += stride) acc.add(Element<T>::load(data, i));
  } else {
    for (int64_t i = begin + offset; i < end; i += stride) acc.add(Element<T>::store_unscaled(data, i, inv_scale));
  }
  return acc;
}

}  // namespace keel::probe::cuda
