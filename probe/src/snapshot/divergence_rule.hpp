// DivergenceDetector: has the run diverged, so that skipping single steps no longer saves it
// and a rewind should (ProbeOptions::rewind_on_divergence, docs/rewind.md)?
//
// The rule, from what keel already measures each step:
// - the loss: above loss_factor (2) times the median of the last `window` (64) losses that were
//   not above it, for loss_steps (10) steps in a row. A single bad batch makes one high loss
//   (the spike rule's business); a run whose weights were pushed off course by a few finite
//   updates keeps a high loss for many steps (keel-demo's learning rate x1000 for one step: 10x
//   the median, still 2x thirty steps later). The median ignores the outliers of a noisy loss;
//   losses above the bound do not enter the window, so a divergence does not raise its own bar.
//   No verdict until the window holds min_window (16) losses.
// - the health: unsafe_steps (3) unsafe steps in a row (StepHealth: non-finite gradients, a
//   non-finite loss, an overflowing norm). One is a bad batch, which the skip handles; three in
//   a row are a state gone bad, non-finite weights among them (they make every step unsafe).
// The divergence's onset is the first step of the run that completed it: the state to go back
// to is one from before it.
// Threads: the training thread. Never: allocates after construction, throws.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace keel::probe {

struct DivergenceRule {
  double loss_factor = 2.0;
  int64_t loss_steps = 10;
  size_t window = 64;
  size_t min_window = 16;
  int64_t unsafe_steps = 3;
};

struct Divergence {
  int64_t onset = 0;   // the first step of the run that completed it
  std::string why;     // e.g. "the loss above 2x its median 2.55 for 10 steps from step 151 (peak 24.6)"
};

class DivergenceDetector {
 public:
  explicit DivergenceDetector(DivergenceRule rule = {});

  // A recorded step: its loss (NaN: none) and whether it was unsafe. The divergence this step
  // completes, if any; the runs then begin again.
  std::optional<Divergence> observe(int64_t step, double loss, bool unsafe);
  // After a rewind: the runs in progress are forgotten (the window of healthy losses stays).
  void restart();
  // Whether a run is in progress (a loss above the bound, or an unsafe step, at the last step):
  // the state now may be one the policy has to leave, so no snapshot should replace an older one.
  bool in_run() const { return high_steps_ > 0 || unsafe_steps_ > 0; }
  const DivergenceRule& rule() const { return rule_; }

 private:
  double median() const;

  DivergenceRule rule_;
  std::vector<double> losses_;            // ring of the last `window` losses not above the bound
  size_t next_ = 0, count_ = 0;
  mutable std::vector<double> scratch_;   // median()'s
  int64_t high_from_ = -1, high_steps_ = 0;
  double high_peak_ = 0, high_median_ = 0;
  int64_t unsafe_from_ = -1, unsafe_steps_ = 0;
};

}  // namespace keel::probe
