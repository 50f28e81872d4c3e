// step_verdict: whether a step's update must not be applied, decided from the gradient pass's
// per-tensor results on the device, so the optimizer's fused step can skip it there (its
// found_inf) with no host sync.
//
// What it is for: the same rule as StepHealth::blown_up (step_health.hpp), plus the spike
// policy's bound: a step is unsafe when a gradient value is NaN/Inf, the loss is NaN/Inf, or
// the global sum of squares exceeds `max_sumsq` (FLT_MAX: the fp32 overflow; lower when the
// spike policy has a bound from its window). fold() is the per-tensor step, shared by the
// kernel's threads and the CPU tests; unsafe() the decision.
// Threads: plain values. Never: reads anything but its arguments.
#pragma once

#include <cstdint>

#include "stats_math.hpp"

namespace keel::probe::cuda {

struct VerdictTotals {
  double sumsq = 0;
  uint64_t nonfinite = 0;

  KEEL_HD void fold(const GradAccumulator& tensor) {
    sumsq += tensor.sumsq;
    nonfinite += tensor.nonfinite;
  }
  KEEL_HD void merge(const VerdictTotals& other) {
    sumsq += other.sumsq;
    nonfinite += other.nonfinite;
  }
  // `loss_bits`: the loss as fp32 bits; any NaN/Inf there is unsafe. A NaN sum (it cannot be
  // without a non-finite value, but a comparison is the only safe test) counts as above.
  KEEL_HD bool unsafe(uint32_t loss_bits, double max_sumsq) const {
    const bool loss_nonfinite = (loss_bits & 0x7f800000u) == 0x7f800000u;
    return nonfinite > 0 || loss_nonfinite || !(sumsq <= max_sumsq);
  }
  // What a loss scaler calls an overflow (and backs off for): a non-finite gradient value.
  KEEL_HD bool gradients_nonfinite() const { return nonfinite > 0; }
};

// found_inf as ATen's fused optimizers read it: exactly 1.0f to skip, 0.0f to apply.
KEEL_HD float found_inf_value(bool unsafe) { return unsafe ? 1.0f : 0.0f; }

}  // namespace keel::probe::cuda
