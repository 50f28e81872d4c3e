// Probe::Impl's events: what a step whose probe failed did (for its probe_error), the events a
// measured step raises (first non-finite gradient, watched tensor or buffer, spike, skip), and
// the telemetry subscribers' reset. They are kept and published by StepEvents (step_events.hpp).
#include <cmath>
#include <cstdio>

#include "keel/wire/vocabulary.hpp"
#include "probe_impl.hpp"

namespace keel::probe {

std::string Probe::Impl::consequence_of(const StepOutcome& outcome) {
  if (outcome.applied) return "update applied as libtorch would";
  if (outcome.skip_reason == "scaler") {
    return "update skipped as an overflow (the gradients may still be scaled) and the loss scale backed off";
  }
  return "update skipped: " + outcome.skip_reason;
}

void Probe::Impl::raise_events(const StepOutcome& outcome, bool measured) {
  const std::optional<StepCause>& cause = cause_of_step_.cause();
  // An unmeasured step says nothing about health: the run of unsafe steps neither starts nor ends.
  if (measured && health_.blown_up() && !nonfinite_last_step_) {
    // The layer the cause stands for: with a NaN already in the loss, the first non-finite
    // gradient in backward order is only the layer nearest the loss, and is not named.
    const bool loss_first = health_.loss_nonfinite && (!cause || cause->layer.empty());
    std::string detail =
        describe_health(health_, record_.loss, layers_.reducer().grad_stats(), layers_.names(), !loss_first);
    if (outcome.applied && options_.skip_on_nonfinite && !health_.unsafe_to_apply(loss_is_the_jobs())) {
      detail += "; update applied: this rank's loss alone is non-finite and its gradients are safe, and a rank "
                "skipping on its own would leave the replicas apart";
    }
    const bool named = health_.layer != StepHealth::kNoLayer && !loss_first;
    add_event(wire::event_kind::kFirstNonfinite,
              cause ? cause->layer : named ? layers_.names()[health_.layer] : std::string(), detail);
    if (cause) events_.last().cause = cause->cause;
  }
  if (measured) nonfinite_last_step_ = health_.blown_up();

  bool watch_nonfinite = false;
  for (const auto& w : record_.watches) {
    if (w.nonfinite == 0) continue;
    if (!watch_nonfinite && !watch_nonfinite_last_step_) {
      add_event(wire::event_kind::kFirstNonfiniteWatch, w.name,
                std::to_string(w.nonfinite) + " non-finite values in watched tensor " + w.name);
    }
    watch_nonfinite = true;
  }
  watch_nonfinite_last_step_ = watch_nonfinite;

  // Buffers not measured this step say nothing: the run of non-finite buffers neither starts nor ends.
  if (const int first = buffers_.take_turned_nonfinite(); first >= 0) {
    add_event(wire::event_kind::kNonfiniteBuffer, buffers_.watched().names[static_cast<size_t>(first)], buffers_.describe_nonfinite());
  }

  // A non-finite norm is a spike to the policy, but its event would repeat first_nonfinite.
  if (measured && spike_verdict_.spike && std::isfinite(spike_verdict_.z)) {
    char text[160];
    std::snprintf(text, sizeof text, "grad norm %.4g is %.1f sigma above the typical %.4g of the last %zu steps (log scale); ",
                  record_.grad_norm, spike_verdict_.z, spike_verdict_.mean_norm, spike_verdict_.compared_with);
    add_event(wire::event_kind::kSpike, cause ? cause->layer : std::string(),
              std::string(text) + (outcome.skip_reason == "spike" ? "update skipped"
                                   : options_.skip_on_spike ? "update not applied: " + outcome.skip_reason
                                                            : "policy skip_spike off: update applied"));
    if (cause) events_.last().cause = cause->cause;
  }
  if (!outcome.applied) {
    std::string why = outcome.skip_reason;
    if (outcome.skip_reason == "nonfinite") why += " (" + outcome.nonfinite_cause + ")";
    if (outcome.skip_reason == "other_rank") {
      why += " (rank " + std::to_string(agreed_.rank) + " skipped it: " + skip_reason_of(agreed_.skip) +
             "; the ranks of a sharded job skip together)";
    }
    add_event(wire::event_kind::kSkip, "", "update skipped: " + why);
  }
}

void Probe::Impl::report_subscription_resets() {
  if (!publisher_) return;
  const uint64_t resets = publisher_->subscription_resets();
  if (resets == subscription_resets_seen_) return;
  subscription_resets_seen_ = resets;
  add_event(wire::event_kind::kTelemetryReset, "",
            "telemetry subscribers held more than " + std::to_string(PublisherOptions{}.max_subscriptions) +
                " subscriptions (a client subscribing without bound): every telemetry connection was closed (" +
                std::to_string(resets) + " time(s) so far); clients reconnect, and what was sent meanwhile shows as a gap");
}

}  // namespace keel::probe
