// StepTiming: a step's ProbeTiming from its boundaries on the host.
#include "step_timing.hpp"

namespace keel::probe {

void StepTiming::end_step(const StepTimes& times, double reduce_us, Clock::time_point end_start,
                          Clock::time_point end) {
  timing_.probe_us = probe_us(times, end);
  timing_.reduce_us = reduce_us + outside_us_ + hook_us_;
  // A stage the step did not reach (a deferred step's update and record) is 0.
  const auto span = [](Clock::time_point from, Clock::time_point to) {
    return from.time_since_epoch().count() == 0 || to < from ? 0.0 : micros(to - from);
  };
  timing_.begin_us = span(times.enter, times.begun);
  timing_.layout_us = span(times.begun, times.planned);
  timing_.grads_us = span(times.planned, times.optimizer_start) + hook_us_;
  timing_.backward_us = hook_us_;
  timing_.update_us = span(times.optimizer_end, times.updated);
  timing_.record_us = span(times.updated, times.recorded);
  timing_.end_us = span(end_start, end);
  outside_us_ = 0;
  hook_us_ = 0;
  last_enter_ = times.enter;
}

}  // namespace keel::probe
