// CauseOfStep: why the step being recorded was unsafe (classify_cause, step_cause.hpp), judged
// against the learning rates of the steps before it.
// Owns: the (step, lr) of the last kLrJumpWindow + 1 steps recorded (a jump among them is
// evidence), and the cause of the step being recorded (none when it was safe or not measured).
// Thread: the training thread only (as each step, immediate or deferred, is recorded).
// Never: allocates for the lrs once the window is full, or keeps a cause past the next step
// recorded.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "step_cause.hpp"

namespace keel::probe {

class CauseOfStep {
 public:
  // As `step` is recorded with `lr`: its lr remembered, and the last step's cause forgotten.
  void begin(int64_t step, double lr);
  // The cause of the step begun, from `evidence` of it (its lr_jump found here).
  void classify(StepEvidence evidence);

  const std::optional<StepCause>& cause() const { return cause_; }

 private:
  std::vector<std::pair<int64_t, double>> recent_lrs_;   // (step, lr), oldest first
  std::optional<StepCause> cause_;
};

}  // namespace keel::probe
