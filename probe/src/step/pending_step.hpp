// PendingStep: a deferred step (DESIGN §8), enqueued on the device with its verdict there and
// settled at the next step() (or settle()) when its results have arrived with no wait. What
// the host kept of it until then. A plain value of the training thread.
#pragma once

#include <cstdint>
#include <vector>

#include "keel/probe/grad_scaler.hpp"
#include "step_timing.hpp"
#include "reduce/watch_reducer.hpp"
#include "step_plan.hpp"

namespace keel::probe {

struct PendingStep {
  int64_t step = 0;
  StepPlan plan;
  StepTimes times;
  bool command_skip = false;   // the host skipped it (a command): nothing was stepped
  bool verdict = false;        // the device decided (found_inf): the outcome is not yet known
  bool skip_nonfinite = false; // the policy as it was when the verdict was asked for
  bool updates = false;        // an update pass was enqueued
  bool has_loss = false;
  GradScaler* scaler = nullptr;   // its scale updated on the device, read when the step settles
  double lr = 0;
  std::vector<double> group_lrs;   // read_lrs()
  double reduce_us = 0;
  WatchReducer::Batch watches;   // read when it settles
};

}  // namespace keel::probe
