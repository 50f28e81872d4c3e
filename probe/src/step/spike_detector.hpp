// SpikeDetector: is this step's global gradient norm a spike against the recent steps?
//
// What it is for: the opt-in "skip on a grad-norm spike" policy (DESIGN §2). The rule follows
// OLMo-core's SkipStepOptimizer (a rolling window of the last 128 steps, no decision until the
// window is half full, a step is an outlier above mean + 6 standard deviations) applied, as in
// ZClip, to a z-score; here the statistic is log(grad norm), because gradient norms are
// log-normal-ish and a spike is a multiplicative jump: on a linear scale one earlier spike in
// the window inflates the standard deviation so much that the next one of the same size passes.
// Every finite observation enters the window, spikes included, so a lasting change of level
// (a new phase of training) stops being flagged after a few dozen steps instead of freezing
// the run. A non-finite norm is always a spike, even during warm-up (a user who turned the
// non-finite policy off and the spike policy on must still be protected from it), and is not
// kept; a zero norm is neither judged nor kept (log 0).
// Threads: the training thread only. Never: allocates after construction, throws.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace keel::probe {

struct SpikeRule {
  size_t window = 128;      // OLMo-core's rolling_interval_length
  size_t warmup = 64;       // observations before any decision: half the window, as OLMo-core
  double z_threshold = 6.0; // OLMo-core's sigma_factor; ZClip's 2.5 clips, it is too eager to skip
  double min_std = 0.01;    // log units (1%): a flat history does not turn noise into "spikes"
};

struct SpikeVerdict {
  bool spike = false;
  bool decided = false;     // false during warm-up (unless non-finite) or for a zero norm
  double z = 0;             // (log norm - mean) / std of the window before this step; +Inf
                            // for a non-finite norm
  double mean_norm = 0;     // exp(mean of log norms): the window's typical norm
  size_t compared_with = 0; // steps in the window this step was judged against
};

class SpikeDetector {
 public:
  explicit SpikeDetector(SpikeRule rule = {});

  // Judges `grad_norm` against the window, then adds it to the window.
  SpikeVerdict observe(double grad_norm);
  // The norm above which observe() would call the next step a spike: exp(mean + z * std) of
  // the window, or +Inf during warm-up (when only a non-finite norm is one). For the device
  // verdict, which decides the same question before the host sees the norm.
  double bound_norm() const;
  const SpikeRule& rule() const { return rule_; }
  size_t observations() const { return count_; }

 private:
  double mean_log() const;   // of the window; count_ > 0
  double std_log(double mean) const;   // of the window, floored at min_std; count_ > 1

  SpikeRule rule_;
  std::vector<double> logs_;   // ring of the last `window` log norms
  size_t next_ = 0;
  size_t count_ = 0;           // valid entries in logs_
};

}  // namespace keel::probe
