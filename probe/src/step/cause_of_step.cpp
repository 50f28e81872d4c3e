// CauseOfStep: the lrs of the last steps kept, and the cause of each step recorded.
#include "cause_of_step.hpp"

namespace keel::probe {

void CauseOfStep::begin(int64_t step, double lr) {
  cause_.reset();
  recent_lrs_.emplace_back(step, lr);
  if (recent_lrs_.size() > static_cast<size_t>(kLrJumpWindow) + 1) recent_lrs_.erase(recent_lrs_.begin());
}

void CauseOfStep::classify(StepEvidence evidence) {
  evidence.lr_jump = latest_lr_jump(recent_lrs_, evidence.step);
  cause_ = classify_cause(evidence);
}

}  // namespace keel::probe
