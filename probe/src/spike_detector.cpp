#include "spike_detector.hpp"

#include <algorithm>
#include <cmath>

namespace keel::probe {

SpikeDetector::SpikeDetector(SpikeRule rule) : rule_(rule) {
  rule_.window = std::max<size_t>(rule_.window, 2);
  rule_.warmup = std::clamp<size_t>(rule_.warmup, 2, rule_.window);
  logs_.assign(rule_.window, 0.0);
}

SpikeVerdict SpikeDetector::observe(double grad_norm) {
  SpikeVerdict verdict;
  if (!std::isfinite(grad_norm) || grad_norm <= 0) return verdict;
  const double x = std::log(grad_norm);
  if (count_ >= rule_.warmup) {
    // Two passes over at most `window` values: exact, and cheap next to one step.
    double sum = 0;
    for (size_t i = 0; i < count_; ++i) sum += logs_[i];
    const double mean = sum / static_cast<double>(count_);
    double squares = 0;
    for (size_t i = 0; i < count_; ++i) squares += (logs_[i] - mean) * (logs_[i] - mean);
    const double std = std::max(std::sqrt(squares / static_cast<double>(count_ - 1)), rule_.min_std);
    verdict.decided = true;
    verdict.z = (x - mean) / std;
    verdict.mean_norm = std::exp(mean);
    verdict.compared_with = count_;
    verdict.spike = verdict.z > rule_.z_threshold;
  }
  logs_[next_] = x;
  next_ = (next_ + 1) % logs_.size();
  count_ = std::min(count_ + 1, logs_.size());
  return verdict;
}

}  // namespace keel::probe
