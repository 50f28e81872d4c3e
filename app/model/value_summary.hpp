// Summary: what one pixel column (or heatmap cell) of a series holds.
//
// What it is for: the unit every model query returns. A summary keeps the exact minimum and
// maximum of the finite samples it covers and, separately, whether any NaN, +Inf or -Inf was
// among them. Non-finite values are never folded into min/max or averaged: in keel a NaN is the
// signal, so a column that holds one must say so however far the view is zoomed out.
// SummaryBuilder is how the store folds samples and buckets into a Summary.
// Threads: plain values; any thread.
// Never: allocates, throws, or blocks.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace keel::app {

// Bits of Summary::flags. kHasData: at least one sample (finite or not) was stored in the
// covered steps; a column whose steps were all missing (gap, metric not due) has no bits set.
enum ValueFlag : uint8_t {
  kHasData = 1u << 0,
  kHasNan = 1u << 1,
  kHasPosInf = 1u << 2,
  kHasNegInf = 1u << 3,
};

struct Summary {
  // Exact extremes of the finite samples; both NaN when the summary holds no finite sample.
  float min = std::numeric_limits<float>::quiet_NaN();
  float max = std::numeric_limits<float>::quiet_NaN();
  uint8_t flags = 0;

  bool has_data() const { return (flags & kHasData) != 0; }
  bool has_finite() const { return min <= max; }
  bool has_nan() const { return (flags & kHasNan) != 0; }
  bool has_posinf() const { return (flags & kHasPosInf) != 0; }
  bool has_neginf() const { return (flags & kHasNegInf) != 0; }
  bool has_nonfinite() const { return (flags & (kHasNan | kHasPosInf | kHasNegInf)) != 0; }
};

// Folds samples and stored buckets. Starts empty (lo = +inf, hi = -inf, so the first finite
// value sets both without a branch); finish() turns "no finite sample" into NaN min/max.
struct SummaryBuilder {
  float lo = std::numeric_limits<float>::infinity();
  float hi = -std::numeric_limits<float>::infinity();
  // Wider than Summary::flags on purpose: a byte-sized member made the compiler store a byte
  // and reload the whole struct, a store-forwarding stall on every column of a query.
  uint32_t flags = 0;

  // Flags a single value adds: kHasData plus its non-finite kind, if any.
  static uint8_t flags_of(float value) {
    if (std::isfinite(value)) return kHasData;
    if (std::isnan(value)) return kHasData | kHasNan;
    return value > 0 ? (kHasData | kHasPosInf) : (kHasData | kHasNegInf);
  }

  void add_value(float value) {
    if (std::isfinite(value)) {
      lo = value < lo ? value : lo;
      hi = value > hi ? value : hi;
      flags |= kHasData;
    } else {
      flags |= flags_of(value);
    }
  }

  void add_bucket(float bucket_lo, float bucket_hi, uint32_t bucket_flags) {
    lo = bucket_lo < lo ? bucket_lo : lo;
    hi = bucket_hi > hi ? bucket_hi : hi;
    flags |= bucket_flags;
  }

  Summary finish() const {
    Summary out;
    if (lo <= hi) {
      out.min = lo;
      out.max = hi;
    }
    out.flags = static_cast<uint8_t>(flags);
    return out;
  }
};

}  // namespace keel::app
