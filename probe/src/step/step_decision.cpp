// The decide stage (step_decision.hpp).
#include "step_decision.hpp"

#include <cmath>
#include <cstdio>

#include "keel/wire/vocabulary.hpp"

namespace keel::probe {

void StepDecision::judge(double loss, bool has_loss, const std::vector<GradStats>& grads,
                         const std::function<int64_t(size_t)>& position, StepOutcome& outcome) {
  health_ = assess_step(loss, has_loss, grads, position);
  outcome.nonfinite_layers = health_.nonfinite_layers;
  outcome.nonfinite_cause = health_.cause();
}

void StepDecision::judge_spike(bool judged) {
  verdict_ = SpikeVerdict{};
  // A norm that overflows fp32 is judged as the Inf that fp32 arithmetic makes of it.
  if (judged) verdict_ = spike_.observe(health_.norm_overflow ? std::numeric_limits<double>::infinity() : health_.grad_norm);
}

void StepDecision::decide(bool command_skip, const Reduction& r, const ProbeOptions& options, bool loss_is_the_jobs,
                          StepOutcome& outcome) const {
  if (command_skip) {
    outcome.applied = false;
    outcome.skip_reason = "command";
  } else if (r.scaler_found_inf) {
    outcome.applied = false;
    outcome.skip_reason = "scaler";
  } else if (r.stats_ok && options.skip_on_nonfinite && health_.unsafe_to_apply(loss_is_the_jobs)) {
    outcome.applied = false;
    outcome.skip_reason = "nonfinite";
  } else if (r.stats_ok && options.skip_on_spike && verdict_.spike) {
    outcome.applied = false;
    outcome.skip_reason = "spike";
  }
}

std::string StepDecision::consequence_of(const StepOutcome& outcome) {
  if (outcome.applied) return "update applied as libtorch would";
  if (outcome.skip_reason == "scaler") {
    return "update skipped as an overflow (the gradients may still be scaled) and the loss scale backed off";
  }
  return "update skipped: " + outcome.skip_reason;
}

void StepDecision::tell_unsafe_start(const Told& told, StepEvents& events, int64_t step) {
  const std::optional<StepCause>& cause = told.cause;
  // An unmeasured step says nothing about health: the run of unsafe steps neither starts nor ends.
  if (starts_unsafe_run(told.measured)) {
    // The layer the cause stands for: with a NaN already in the loss, the first non-finite
    // gradient in backward order is only the layer nearest the loss, and is not named.
    const bool loss_first = health_.loss_nonfinite && (!cause || cause->layer.empty());
    std::string detail = describe_health(health_, told.loss, told.grads, told.names, !loss_first);
    if (told.outcome.applied && told.options.skip_on_nonfinite && !health_.unsafe_to_apply(told.loss_is_the_jobs)) {
      detail += "; update applied: this rank's loss alone is non-finite and its gradients are safe, and a rank "
                "skipping on its own would leave the replicas apart";
    }
    const bool named = health_.layer != StepHealth::kNoLayer && !loss_first;
    events.add(step, wire::event_kind::kFirstNonfinite,
               cause ? cause->layer : named ? told.names[health_.layer] : std::string(), detail);
    if (cause) events.last().cause = cause->cause;
  }
  if (told.measured) blown_up_last_step_ = health_.blown_up();
}

void StepDecision::tell_spike_and_skip(const Told& told, const RankVerdict& agreed, StepEvents& events,
                                       int64_t step) const {
  const StepOutcome& outcome = told.outcome;
  if (told.measured && verdict_.spike && std::isfinite(verdict_.z)) {
    char text[160];
    std::snprintf(text, sizeof text, "grad norm %.4g is %.1f sigma above the typical %.4g of the last %zu steps (log scale); ",
                  told.grad_norm, verdict_.z, verdict_.mean_norm, verdict_.compared_with);
    events.add(step, wire::event_kind::kSpike, told.cause ? told.cause->layer : std::string(),
               std::string(text) + (outcome.skip_reason == "spike" ? "update skipped"
                                    : told.options.skip_on_spike ? "update not applied: " + outcome.skip_reason
                                                                 : "policy skip_spike off: update applied"));
    if (told.cause) events.last().cause = told.cause->cause;
  }
  if (!outcome.applied) {
    std::string why = outcome.skip_reason;
    if (outcome.skip_reason == "nonfinite") why += " (" + outcome.nonfinite_cause + ")";
    if (outcome.skip_reason == "other_rank") {
      why += " (rank " + std::to_string(agreed.rank) + " skipped it: " + skip_reason_of(agreed.skip) +
             "; the ranks of a sharded job skip together)";
    }
    events.add(step, wire::event_kind::kSkip, "", "update skipped: " + why);
  }
}

}  // namespace keel::probe
