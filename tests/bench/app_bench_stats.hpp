// Order statistics for keel-bench-app's samples (frame times, step-to-pixel latencies).
// Threads: pure functions. Never: throws; an empty sample gives 0.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace keel::bench {

// The q-quantile (q in [0, 1]) by linear interpolation between the nearest ranks, so that the
// p99 of a few hundred samples is not simply the largest one.
inline double percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double rank = std::clamp(q, 0.0, 1.0) * double(values.size() - 1);
  const size_t low = size_t(std::floor(rank));
  const size_t high = std::min(values.size() - 1, low + 1);
  return values[low] + (values[high] - values[low]) * (rank - double(low));
}

}  // namespace keel::bench
