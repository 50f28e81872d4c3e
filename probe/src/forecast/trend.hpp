// Trend: where one series is heading, in two exponential moving averages of its values: a
// fast level (the last few steps) and a slow baseline (the last few hundred), and the fast
// level's slope. The forecaster feeds it the log of a signal, so that "doubled" is a
// difference of log 2 whatever the signal's scale, and a single outlier moves the fast level
// by a bounded step (one 100x spike: log 100 times the fast weight, 8% at a half-life of 8).
// The baseline lags a lasting change by about its half-life: a signal that doubles within tens
// of steps stands out; one that drifts over thousands of steps (a healthy run's grad norm
// does) does not.
// Threads: the owner's. Never: allocates, throws.
#pragma once

#include <cstdint>

namespace keel::probe {

class Trend {
 public:
  Trend(double fast_half_life, double slow_half_life);

  // A finite value of the series (the caller leaves out what it cannot take the log of).
  void observe(double y);
  int64_t count() const { return count_; }
  double level() const { return fast_; }
  double baseline() const { return slow_; }
  // level - baseline: for a log series, the log of how many times its baseline it stands at.
  double excess() const { return fast_ - slow_; }
  // How much the fast level moved a step, smoothed as the level is.
  double slope() const { return slope_; }
  // `t` with its baseline put at its level: the baseline starts again from here, leaving out
  // what came before (a run's first steps, whose values move as a model starts to learn).
  static Trend rebased(Trend t) {
    t.slow_ = t.fast_;
    return t;
  }

 private:
  double fast_weight_, slow_weight_;
  double fast_ = 0, slow_ = 0, slope_ = 0;
  int64_t count_ = 0;
};

}  // namespace keel::probe
