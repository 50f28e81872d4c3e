// StepPlan and Reduction: what a step measures, and what its reduce stage found. The plan is
// made as the step begins (plan_step, from the cadence and the policies); its frozen and unused
// layers after the gradient pass (classify_layers). Plain values and functions, on the
// training thread. Never: allocates once the layer lists have grown to the model's width.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "keel/probe/probe_options.hpp"
#include "planned_layers.hpp"

namespace keel::probe {

// What this step measures, from the cadence and the policies.
struct StepPlan {
  uint32_t mask = 0;          // bit m: layer metric m is due
  bool grads_due = false;     // a gradient pass: a gradient metric or a deciding policy
  bool update_due = false;    // update_ratio: snapshot before, update pass after
  bool param_due = false;     // weight norms
  // Layers that have no gradient of this step's (ascending): frozen (requires_grad off)
  // and unused (this step's backward passed them by). Read as the step begins, while the
  // gradients are the backward's.
  std::vector<uint32_t> frozen, unused;
};

// What the reduce stage found. stats_ok is false when the probe itself failed there: no
// health, no gradient statistics, and `error` says why.
struct Reduction {
  bool stats_ok = true;
  std::string error;
  uint32_t lost_mask = 0;   // layer metrics that were due but could not be measured
  bool scaler_found_inf = false;
  double loss = std::numeric_limits<double>::quiet_NaN();
  double scale = 0;           // the loss scale the gradients were computed with (with a scaler)
  double reduce_us = 0;
  std::optional<double> lr;   // a deferred step's, as it was; else read when recorded
  std::vector<double> group_lrs;   // with `lr`: every group's, when there are several
  // The gradient walk found a tensor that left its plan (PlannedLayers::take_walk_check), before any
  // gradient was written: nothing else was measured.
  bool layout_moved = false;
};

// Whether `step` runs a gradient pass: a gradient metric is due, or a policy or a scaler
// decides on the gradients.
bool gradient_pass_due(const ProbeOptions& options, int64_t step, bool has_scaler);

// What `step` measures. update_ratio is left out where it would need a copy of the weights
// on a device that was not asked for (ProbeOptions::snapshot_for_update_ratio).
StepPlan plan_step(const ProbeOptions& options, int64_t step, bool has_scaler, const LayerReducer& reducer);

// plan.frozen and plan.unused, from the states this step's gradient pass read (when the
// reducer's grad_passes() moved past `grad_passes_before`), else from the parameters.
void classify_layers(StepPlan& plan, const PlannedLayers& layers, uint64_t grad_passes_before);

}  // namespace keel::probe
