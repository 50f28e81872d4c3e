// The median of a benchmark's samples, shared by every benchmark that summarises runs.
#pragma once

#include <algorithm>
#include <vector>

namespace keel::bench {

// The median of `samples` (the mean of the middle two for an even count; 0 for none).
inline double median(std::vector<double> samples) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  const size_t n = samples.size();
  return n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
}

}  // namespace keel::bench
