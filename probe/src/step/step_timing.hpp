// StepTiming: what the probe costs the training thread, step by step (ProbeTiming, and the
// record's probe_us and step_time_us).
// Owns: this step's probe time outside step() (probe.watch(), the closure form's saving of the
// re-run's state), its time in the gradient accumulators' hooks (spent inside backward), when
// the last step began, and the last step's ProbeTiming.
// Thread: the training thread only.
// Never: allocates, blocks, or reads a device's clock: a stage's time is the host's.
#pragma once

#include <optional>

#include "keel/probe/probe.hpp"
#include "probe_clock.hpp"

namespace keel::probe {

// A step's boundaries on the host.
struct StepTimes {
  Clock::time_point enter, optimizer_start, optimizer_end;
  // Stage boundaries on the host (ProbeTiming): begun after begin_step and settling, planned
  // after the layout check and the plan, updated after the update pass, recorded after record().
  Clock::time_point begun, planned, updated, recorded;
};

class StepTiming {
 public:
  // The probe's time on the training thread outside step(), counted with the step's own.
  void add_outside_step(double us) { outside_us_ += us; }
  // This step's time in the gradient accumulators' hooks (LayerReducer::take_hook_us): spent
  // inside backward, on the training thread, and counted with the gradient pass.
  void set_hooks(double us) { hook_us_ = us; }
  double hooks() const { return hook_us_; }

  // The probe's time in the step that began at `times.enter`, until `now` (optimizer.step()
  // excluded).
  double probe_us(const StepTimes& times, Clock::time_point now) const {
    return micros(times.optimizer_start - times.enter) + micros(now - times.optimizer_end) + outside_us_ + hook_us_;
  }
  // From the last step's start to this one's (0 for the first).
  double since_last_step(Clock::time_point enter) const { return last_enter_ ? micros(enter - *last_enter_) : 0.0; }
  // As the step ends: its ProbeTiming, from its boundaries, its reductions' `reduce_us` and
  // the end's own [end_start, end); this step's counts start again.
  void end_step(const StepTimes& times, double reduce_us, Clock::time_point end_start, Clock::time_point end);

  const ProbeTiming& last() const { return timing_; }

 private:
  double outside_us_ = 0;
  double hook_us_ = 0;
  std::optional<Clock::time_point> last_enter_;
  ProbeTiming timing_;
};

}  // namespace keel::probe
