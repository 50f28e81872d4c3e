// Alert: one thing worth waking someone for, as the watcher and the dashboard raise it.
//
// What it is for: the alert policy (alert_policy.hpp) turns received events, and ranks gone
// quiet, into Alerts; the Alerter prints each, hands it to the user's command as JSON
// (alert_json.hpp) and to the desktop's notifier. The kinds that alert are four of the probe's
// event kinds and one of the watcher's own: "silent", a rank that sent steps and then nothing
// for --silent-after seconds, which no probe raises (it cannot say it has stopped).
// Threads: a plain value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "keel/wire/messages.hpp"
#include "keel/wire/vocabulary.hpp"

namespace keel::app {

// The watcher's own kind: not on the wire, never raised by a probe.
inline constexpr const char kSilentAlertKind[] = "silent";

// Every kind that alerts, in the order the options and docs list them.
inline constexpr const char* kAlertKinds[] = {wire::event_kind::kWarning, wire::event_kind::kFirstNonfinite,
                                              wire::event_kind::kRewind, wire::event_kind::kRewindStopped,
                                              kSilentAlertKind};

struct Alert {
  std::string kind;            // one of kAlertKinds
  int32_t rank = 0;
  std::string run, model;      // of the event, or of the last message the silent rank sent
  int64_t step = 0;            // the event's step; for "silent", the last step the rank sent
  std::optional<wire::Event> event;   // the probe's event; empty for "silent"
  double silent_secs = 0;      // "silent": how long the rank has sent nothing
  int64_t stamp_unix_ns = 0;   // when the watcher raised it
  // Alerts of this kind and rank held back by the rate limit since the last one raised.
  uint64_t suppressed = 0;
};

}  // namespace keel::app
