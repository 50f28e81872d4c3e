// The dashboard-side faults of issue 5, each run against a live keel-demo, and what they
// did to it.
//
// What it is for: the ctest fault tests and keel-fault-report run the same scenarios; the
// tests assert on the outcome, the report prints it as a table. Each scenario measures the
// trainer A/B in one run: an undisturbed window, then the fault window, on the same process.
// Threads: the caller's thread (scenarios start their own helpers and stop them).
// Never: leaves a child process behind.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "step_ledger.hpp"
#include "trainer_under_test.hpp"

namespace keel::fault {

enum class Fault {
  kClientKilled,       // keel-cli tail: SIGKILL, restarted; the outage backfilled from the ring
  kClientFrozen,       // keel-cli tail: SIGSTOP for the fault window, then SIGCONT
  kCommandFlood,       // thousands of requests on the command socket: garbage and describes
  kSubscriberFlood,    // subscribers connecting and leaving, and one that never reads
  kHostileSubscriptions,  // five 10 MB topic subscriptions and 10,000 distinct random ones
  kAppKilled,          // the keel dashboard under Xvfb: SIGKILL, restarted
  kAppFrozen,          // the keel dashboard under Xvfb: SIGSTOP, then SIGCONT
  kTrainerRestarted,   // keel-demo killed and started again while the dashboard watches
};
const char* fault_name(Fault fault);
bool fault_needs_app(Fault fault);

struct FaultTiming {
  double baseline_secs = 4;   // undisturbed window (A)
  double fault_secs = 5;      // fault window (B); SIGSTOP lasts this long
  double after_secs = 3;      // after recovery, before the trainer stops
};
// CI-sized timing, or the 30 s fault with KEEL_FAULT_LONG=1 (or long_run).
FaultTiming fault_timing(bool long_run = false);

struct FaultOutcome {
  std::string fault;
  Percentiles baseline_step_us, fault_step_us;     // step_time_us in windows A and B
  Percentiles baseline_probe_us, fault_probe_us;   // probe_us in windows A and B
  long rss_start_kib = -1, rss_end_kib = -1, rss_max_kib = -1;
  int64_t steps_checked = 0;    // published steps the clients had to account for
  int64_t steps_missing = 0;    // of those, in no client's stream and no backfill
  uint64_t steps_dropped = 0;   // the probe's own count of records it could not publish
  double longest_gap_secs = 0;  // longest time between two steps of the trainer
  uint64_t commands_sent = 0, commands_ok = 0, commands_refused = 0;
  uint64_t commands_unanswered = 0, duplicate_acks = 0;
  bool client_survived = true;  // the dashboard (or the client) is still running at the end
  bool trainer_survived = true; // keel-demo was still training when the scenario ended it
  std::string detail;           // what the client said (backfill lines, refusal kinds)
  std::string failure;          // set when the scenario itself could not run
};

FaultOutcome run_fault(Fault fault, const Binaries& binaries, const FaultTiming& timing);

}  // namespace keel::fault
