// ReferenceSeries: the samples a test appended, kept in full, and the brute-force answers the
// model's queries must match.
//
// What it is for: tests of SeriesHistory compare every column against a plain scan over the
// raw samples of the steps the column reports it covered.
// Threads: test thread only.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "model/value_summary.hpp"

namespace keel::app::test_support {

class ReferenceSeries {
 public:
  explicit ReferenceSeries(int64_t origin) : origin_(origin) {}

  void set(int64_t step, float value) {
    const auto index = static_cast<size_t>(step - origin_);
    if (index >= values_.size()) {
      values_.resize(index + 1, 0.0f);
      present_.resize(index + 1, false);
    }
    values_[index] = value;
    present_[index] = true;
  }

  // Forgets the samples after `step`, as SeriesHistory::drop_after() does.
  void drop_after(int64_t step) {
    const auto keep = static_cast<size_t>(std::max<int64_t>(0, step + 1 - origin_));
    if (keep < values_.size()) {
      values_.resize(keep);
      present_.resize(keep);
    }
  }

  // Brute force over steps [first, last], both inclusive.
  Summary summarize(int64_t first, int64_t last) const {
    SummaryBuilder builder;
    const int64_t end = origin_ + static_cast<int64_t>(values_.size());
    for (int64_t s = std::max(first, origin_); s <= last && s < end; ++s) {
      const auto index = static_cast<size_t>(s - origin_);
      if (present_[index]) builder.add_value(values_[index]);
    }
    return builder.finish();
  }

 private:
  int64_t origin_;
  std::vector<float> values_;
  std::vector<bool> present_;
};

// Same min, max (bit for bit, NaN when no finite sample) and flags.
inline bool same_summary(const Summary& a, const Summary& b) {
  const bool same_min = (std::isnan(a.min) && std::isnan(b.min)) || a.min == b.min;
  const bool same_max = (std::isnan(a.max) && std::isnan(b.max)) || a.max == b.max;
  return same_min && same_max && a.flags == b.flags;
}

// Mostly smooth values with rare spikes, NaN, +Inf and -Inf: the shapes a gradient norm has.
inline float random_sample(std::mt19937_64& rng, int64_t step) {
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  const float roll = unit(rng);
  if (roll < 0.001f) return std::numeric_limits<float>::quiet_NaN();
  if (roll < 0.0015f) return std::numeric_limits<float>::infinity();
  if (roll < 0.002f) return -std::numeric_limits<float>::infinity();
  if (roll < 0.004f) return 1e6f * unit(rng);
  return std::sin(static_cast<float>(step) * 1e-3f) + unit(rng);
}

}  // namespace keel::app::test_support
