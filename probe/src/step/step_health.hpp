// StepHealth: whether this step's update is safe to apply, and if not, what was seen and where.
//
// What it is for: the non-finite policy (DESIGN §2), the automatic dump and the
// first_nonfinite event all ask the same question before the update. A step is blown up when
// - a gradient value is NaN or Inf;
// - the loss is NaN or Inf;
// - the global gradient norm overflows float32 (its sum of squares exceeds FLT_MAX, a norm
//   above 1.8e19). A poisoned batch does this with every value still finite: a corrupt target
//   makes the loss overflow while the gradients reach 1e21-1e29. The fp32 arithmetic that
//   follows (g^2 in Adam's second moment, sum g^2 in gradient clipping, w - lr * g in SGD)
//   overflows or ruins the weights, so such an update is never worth applying.
// The layer named is the first in backward order with non-finite values; without one, the
// first in backward order whose own norm overflows fp32; when no single layer does (the
// overflow is the sum of many, or only the loss is non-finite), the layer with the largest
// norm.
// Threads: plain values and functions, called on the training thread. Never: throws.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "keel/probe/fused_reduce.hpp"

namespace keel::probe {

struct StepHealth {
  static constexpr size_t kNoLayer = std::numeric_limits<size_t>::max();

  bool loss_nonfinite = false;
  bool norm_overflow = false;      // global sum of squares above FLT_MAX
  int64_t nonfinite_layers = 0;    // layers with NaN/Inf gradient values
  int64_t overflow_layers = 0;     // layers whose own sum of squares is above FLT_MAX
  double grad_norm = 0;            // global, from the fp64 sums (finite for finite gradients)
  size_t layer = kNoLayer;         // the layer to name (see above)

  bool blown_up() const { return loss_nonfinite || norm_overflow || nonfinite_layers > 0; }
  // Whether the update would be unsafe to apply. A data-parallel rank's loss is its own while
  // its gradients are the job's (all-reduced, the same on every rank): a non-finite loss with
  // safe gradients is unsafe only where `loss_is_the_jobs` (one rank), since a rank skipping on
  // its own would leave the replicas' weights apart for the rest of the run.
  bool unsafe_to_apply(bool loss_is_the_jobs) const {
    return norm_overflow || nonfinite_layers > 0 || (loss_nonfinite && loss_is_the_jobs);
  }
  // What was seen, most specific first: "non-finite gradient values", "overflowing grad norm",
  // "non-finite loss", joined by " + " when several were; "" when the step is healthy.
  std::string cause() const;
};

// position(layer): the layer's arrival in this step's backward pass (0 = first), -1 if its
// gradient did not arrive. `loss` is NaN when the step had none to check (pass has_loss false).
StepHealth assess_step(double loss, bool has_loss, const std::vector<GradStats>& grads,
                       const std::function<int64_t(size_t)>& position);

// The first_nonfinite event's text: what was seen, then the numbers behind each, and with
// `name_layer` the layer (left out where it would mislead: a NaN already in the loss makes the
// layer nearest the loss the first non-finite gradient in backward order).
std::string describe_health(const StepHealth& health, double loss, const std::vector<GradStats>& grads,
                            const std::vector<std::string>& names, bool name_layer = true);

}  // namespace keel::probe
