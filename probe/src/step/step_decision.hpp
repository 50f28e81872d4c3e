// StepDecision: the decide stage. From what the reduce stage measured it judges the step (its
// StepHealth and the spike rule's verdict), decides on the host whether its update is applied,
// and tells what it judged and decided: the first_nonfinite, spike and skip events.
// Owns: this step's health and spike verdict, the spike rule's window, and whether the last
// measured step was blown up (where a run of unsafe steps starts: one first_nonfinite event,
// one automatic dump and one traced re-run a run).
// Thread: the training thread.
// Never: waits, or allocates once the spike window is full (an event allocates: events are
// raised when something changes).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "keel/probe/fused_reduce.hpp"
#include "keel/probe/probe.hpp"
#include "rank_verdict.hpp"
#include "spike_detector.hpp"
#include "step_cause.hpp"
#include "step_events.hpp"
#include "step_health.hpp"
#include "step_plan.hpp"

namespace keel::probe {

class StepDecision {
 public:
  explicit StepDecision(SpikeRule rule) : spike_(rule) {}

  // Forgets this step's judgement: a step whose reductions failed says nothing of its health.
  void forget() {
    health_ = StepHealth{};
    verdict_ = SpikeVerdict{};
  }
  // Judges the step from its loss (`has_loss` false: it had none) and gradient statistics;
  // `position` is a layer's arrival in backward. The outcome gets the counts and the cause.
  void judge(double loss, bool has_loss, const std::vector<GradStats>& grads,
             const std::function<int64_t(size_t)>& position, StepOutcome& outcome);
  // The spike rule's verdict of the step judged, its norm added to the window. Not `judged`
  // (no gradient pass, or an overflow the scaler found: its business, the backoff): no spike.
  void judge_spike(bool judged);

  // On the host: whether the update is applied, and why not. A command's skip holds whatever
  // the gradients look like; then the scaler's overflow; then the policies, on a measured step.
  void decide(bool command_skip, const Reduction& reduction, const ProbeOptions& options, bool loss_is_the_jobs,
              StepOutcome& outcome) const;

  // What a step whose probe failed did, for its probe_error event.
  static std::string consequence_of(const StepOutcome& outcome);

  // Whether this measured step begins a run of blown-up steps.
  bool starts_unsafe_run(bool measured) const { return measured && health_.blown_up() && !blown_up_last_step_; }

  // What a step that was recorded tells.
  struct Told {
    const StepOutcome& outcome;
    bool measured;   // its health and spike verdict are its own (its reductions succeeded)
    const std::optional<StepCause>& cause;
    double loss;
    double grad_norm;
    const std::vector<GradStats>& grads;
    const std::vector<std::string>& names;
    const ProbeOptions& options;
    bool loss_is_the_jobs;
  };
  // The first_nonfinite event of a step that begins a run of unsafe steps; then the step is
  // over for the rule of runs (a measured step's health is the last step's from now on).
  void tell_unsafe_start(const Told& told, StepEvents& events, int64_t step);
  // The spike event (a non-finite norm is a spike to the policy, but its event would repeat
  // first_nonfinite), and the skip event of a step not applied; `agreed`: a sharded job's
  // verdict, which names the rank that skipped.
  void tell_spike_and_skip(const Told& told, const RankVerdict& agreed, StepEvents& events, int64_t step) const;

  const StepHealth& health() const { return health_; }
  const SpikeVerdict& spike() const { return verdict_; }
  bool blown_up_last_step() const { return blown_up_last_step_; }
  // The norm above which the next step is a spike (SpikeDetector::bound_norm), for the device's verdict.
  double spike_bound_norm() const { return spike_.bound_norm(); }

 private:
  StepHealth health_;   // this step's, before the update
  SpikeDetector spike_;
  SpikeVerdict verdict_;
  bool blown_up_last_step_ = false;
};

}  // namespace keel::probe
