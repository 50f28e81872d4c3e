// AlertRateLimit: at most one alert per (kind, rank) every interval, and how many were held back.
//
// What it is for: a run that goes wrong raises events in bursts (a warning per layer, a rewind
// after each divergence), and a command that pages someone must not run for each. The first
// alert of a (kind, rank) goes out; the ones within the interval after it are held back and
// counted, and the next one that goes out carries that count (Alert::suppressed), so nothing is
// lost silently, only folded into the next alert of its kind.
// Threads: a plain value owned by one thread (the Alerter's).
// Never: allocates past one entry per (kind, rank) that alerted; ranks outside
// [0, kMaxRanks) share one entry, so a publisher inventing ranks cannot grow it without bound.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <utility>

namespace keel::app {

class AlertRateLimit {
 public:
  using Clock = std::chrono::steady_clock;
  // The dashboard's own bound on ranks (ModelConfig::max_ranks).
  static constexpr int32_t kMaxRanks = 4096;

  // `interval_secs` 0: every alert goes out.
  explicit AlertRateLimit(double interval_secs) : interval_(std::chrono::duration<double>(interval_secs)) {}

  struct Verdict {
    bool go = false;           // raise this alert now
    uint64_t suppressed = 0;   // when it goes: how many of its kind and rank were held back before it
  };
  // Whether an alert of `kind` from `rank` at `now` goes out, counting it when it does not.
  Verdict admit(const std::string& kind, int32_t rank, Clock::time_point now);

 private:
  struct Entry {
    Clock::time_point last_raised;
    uint64_t held_back = 0;
  };
  std::chrono::duration<double> interval_;
  std::map<std::pair<std::string, int32_t>, Entry> entries_;
};

}  // namespace keel::app
