// Probe::Impl's events: each stage tells what it found in the step being recorded, in this
// order: the first non-finite gradient (StepDecision), a watched tensor turned non-finite
// (StepRecordBuilder), a buffer turned non-finite (WatchedBuffers), a spike and a skip
// (StepDecision). They are kept and published by StepEvents (step_events.hpp).
#include "probe_impl.hpp"

namespace keel::probe {

void Probe::Impl::raise_events(const StepOutcome& outcome, bool measured) {
  const wire::StepRecord& message = record_.message();
  const StepDecision::Told told{outcome,
                                measured,
                                cause_of_step_.cause(),
                                message.loss,
                                message.grad_norm,
                                layers_.reducer().grad_stats(),
                                layers_.names(),
                                options_,
                                loss_is_the_jobs()};
  decision_.tell_unsafe_start(told, events_, record_step_);
  record_.tell_watch_nonfinite(events_, record_step_);
  buffers_.tell_turned_nonfinite(events_, record_step_);
  decision_.tell_spike_and_skip(told, agreed_, events_, record_step_);
}

}  // namespace keel::probe
