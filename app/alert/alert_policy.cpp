#include "alert/alert_policy.hpp"

namespace keel::app {

AlertPolicy::AlertPolicy(const AlertOptions& options)
    : kinds_(options.kinds.begin(), options.kinds.end()),
      limit_(options.interval_secs),
      silence_(options.silent_after_secs) {}

std::optional<Alert> AlertPolicy::on_event(const wire::Event& event, Clock::time_point now, int64_t unix_ns) {
  // "silent" is the watcher's own word: an event a publisher named so is not a silence.
  if (!alerts_on(event.kind) || event.kind == kSilentAlertKind) return std::nullopt;
  const AlertRateLimit::Verdict verdict = limit_.admit(event.kind, event.rank, now);
  if (!verdict.go) return std::nullopt;
  Alert alert;
  alert.kind = event.kind;
  alert.rank = event.rank;
  alert.run = event.run;
  alert.model = event.model;
  alert.step = event.step;
  alert.event = event;
  alert.stamp_unix_ns = unix_ns;
  alert.suppressed = verdict.suppressed;
  return alert;
}

std::vector<Alert> AlertPolicy::silences(Clock::time_point now, int64_t unix_ns) {
  std::vector<Alert> alerts;
  if (!alerts_on(kSilentAlertKind)) return alerts;
  for (const SilenceWatch::Silence& silence : silence_.due(now)) {
    const AlertRateLimit::Verdict verdict = limit_.admit(kSilentAlertKind, silence.last.rank, now);
    if (!verdict.go) continue;
    Alert alert;
    alert.kind = kSilentAlertKind;
    alert.rank = silence.last.rank;
    alert.run = silence.last.run;
    alert.model = silence.last.model;
    alert.step = silence.last.step;
    alert.silent_secs = silence.silent_secs;
    alert.stamp_unix_ns = unix_ns;
    alert.suppressed = verdict.suppressed;
    alerts.push_back(std::move(alert));
  }
  return alerts;
}

}  // namespace keel::app
