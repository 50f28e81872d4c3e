#include "forecast/trend.hpp"

#include <cmath>

namespace keel::probe {

namespace {
// The weight an average gives each new value so that an old one's weight halves every
// `half_life` values.
double weight_of(double half_life) { return 1.0 - std::exp2(-1.0 / half_life); }
}  // namespace

Trend::Trend(double fast_half_life, double slow_half_life)
    : fast_weight_(weight_of(fast_half_life)), slow_weight_(weight_of(slow_half_life)) {}

void Trend::observe(double y) {
  if (count_++ == 0) {
    fast_ = slow_ = y;
    return;
  }
  const double before = fast_;
  fast_ += fast_weight_ * (y - fast_);
  slow_ += slow_weight_ * (y - slow_);
  slope_ += fast_weight_ * ((fast_ - before) - slope_);
}

}  // namespace keel::probe
