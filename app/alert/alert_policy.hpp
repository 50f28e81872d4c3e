// AlertPolicy: which received events, and which silences, become alerts.
//
// What it is for: the one decision shared by `keel-cli watch` and the dashboard's
// --alert-command. An event alerts when its kind is one of kAlertKinds that --alert-on kept;
// a rank alerts "silent" as SilenceWatch says; every alert then passes the rate limit
// (AlertRateLimit: one per kind and rank every --alert-interval, the rest counted into the next).
// Time is passed in, so the policy is tested without waiting.
// Threads: a plain value owned by one thread (the Alerter's).
// Never: runs anything or prints; the Alerter does that with what it returns.
#pragma once

#include <chrono>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "alert/alert.hpp"
#include "alert/alert_options.hpp"
#include "alert/alert_rate_limit.hpp"
#include "alert/silence_watch.hpp"
#include "keel/wire/messages.hpp"

namespace keel::app {

class AlertPolicy {
 public:
  using Clock = std::chrono::steady_clock;

  explicit AlertPolicy(const AlertOptions& options);

  // Whether alerts of `kind` are raised at all (a kind --alert-on kept): the Alerter copies
  // only events of those off the receiving thread.
  bool alerts_on(const std::string& kind) const { return kinds_.count(kind) > 0; }

  // An event received at `now` (`unix_ns`: the wall clock then, the alert's stamp): its alert,
  // or nothing when its kind does not alert or the rate limit held it back (and counted it).
  std::optional<Alert> on_event(const wire::Event& event, Clock::time_point now, int64_t unix_ns);
  // A step record or event heard from a rank (SilenceWatch::heard).
  SilenceWatch::Change heard(const SilenceWatch::Heard& heard, Clock::time_point now) { return silence_.heard(heard, now); }
  // The "silent" alerts due at `now`, rate-limited alike; none when --alert-on left "silent" out.
  std::vector<Alert> silences(Clock::time_point now, int64_t unix_ns);

 private:
  std::set<std::string> kinds_;
  AlertRateLimit limit_;
  SilenceWatch silence_;
};

}  // namespace keel::app
