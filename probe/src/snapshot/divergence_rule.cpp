// When a run has diverged (divergence_rule.hpp).
#include "divergence_rule.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace keel::probe {

DivergenceDetector::DivergenceDetector(DivergenceRule rule)
    : rule_(rule), losses_(std::max<size_t>(rule.window, 1)), scratch_(losses_.size()) {}

double DivergenceDetector::median() const {
  scratch_.assign(losses_.begin(), losses_.begin() + static_cast<std::ptrdiff_t>(count_));
  const auto mid = scratch_.begin() + static_cast<std::ptrdiff_t>(count_ / 2);
  std::nth_element(scratch_.begin(), mid, scratch_.end());
  return *mid;
}

void DivergenceDetector::restart() {
  high_from_ = unsafe_from_ = -1;
  high_steps_ = unsafe_steps_ = 0;
}

std::optional<Divergence> DivergenceDetector::observe(int64_t step, double loss, bool unsafe) {
  if (unsafe) {
    if (unsafe_steps_++ == 0) unsafe_from_ = step;
    if (unsafe_steps_ >= rule_.unsafe_steps) {
      Divergence d{unsafe_from_, std::to_string(unsafe_steps_) + " unsafe steps in a row from step " +
                                     std::to_string(unsafe_from_) + " (non-finite gradients, loss or weights)"};
      restart();
      return d;
    }
    return std::nullopt;   // an unsafe step's loss says nothing of the window
  }
  unsafe_steps_ = 0;
  if (!std::isfinite(loss)) return std::nullopt;
  const double bound = count_ >= rule_.min_window ? rule_.loss_factor * median() : HUGE_VAL;
  if (loss > bound) {
    if (high_steps_++ == 0) {
      high_from_ = step;
      high_peak_ = loss;
      high_median_ = bound / rule_.loss_factor;
    }
    high_peak_ = std::max(high_peak_, loss);
    if (high_steps_ >= rule_.loss_steps) {
      char text[200];
      std::snprintf(text, sizeof text, "the loss above %gx its median %.4g for %lld steps from step %lld (peak %.4g)",
                    rule_.loss_factor, high_median_, static_cast<long long>(high_steps_),
                    static_cast<long long>(high_from_), high_peak_);
      Divergence d{high_from_, text};
      restart();
      return d;
    }
    return std::nullopt;
  }
  high_steps_ = 0;
  losses_[next_] = loss;
  next_ = (next_ + 1) % losses_.size();
  count_ = std::min(count_ + 1, losses_.size());
  return std::nullopt;
}

}  // namespace keel::probe
