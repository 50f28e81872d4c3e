#include "spike_detector.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace keel::probe {

SpikeDetector::SpikeDetector(SpikeRule rule) : rule_(rule) {
  rule_.window = std::max<size_t>(rule_.window, 2);
  rule_.warmup = std::clamp<size_t>(rule_.warmup, 2, rule_.window);
  logs_.assign(rule_.window, 0.0);
}

SpikeVerdict SpikeDetector::observe(double grad_norm) {
  SpikeVerdict verdict;
  if (!std::isfinite(grad_norm)) {
    verdict.spike = verdict.decided = true;
    verdict.z = std::numeric_limits<double>::infinity();
    verdict.mean_norm = count_ > 0 ? std::exp(mean_log()) : 0.0;
    verdict.compared_with = count_;
    return verdict;
  }
  if (grad_norm <= 0) return verdict;
  const double x = std::log(grad_norm);
  if (count_ >= rule_.warmup) {
    const double mean = mean_log();
    const double std = std_log(mean);
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

double SpikeDetector::bound_norm() const {
  if (count_ < rule_.warmup || count_ < 2) return std::numeric_limits<double>::infinity();
  const double mean = mean_log();
  return std::exp(mean + rule_.z_threshold * std_log(mean));
}

// Two passes over at most `window` values: exact, and cheap next to one step.
double SpikeDetector::std_log(double mean) const {
  double squares = 0;
  for (size_t i = 0; i < count_; ++i) squares += (logs_[i] - mean) * (logs_[i] - mean);
  return std::max(std::sqrt(squares / static_cast<double>(count_ - 1)), rule_.min_std);
}

double SpikeDetector::mean_log() const {
  double sum = 0;
  for (size_t i = 0; i < count_; ++i) sum += logs_[i];
  return sum / static_cast<double>(count_);
}

}  // namespace keel::probe
