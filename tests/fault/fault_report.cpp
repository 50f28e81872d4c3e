// keel-fault-report: runs every dashboard-side fault against a live keel-demo and prints the
// table that RELIABILITY.md keeps ("Faults and soak"). --long (or KEEL_FAULT_LONG=1) gives
// the 30 s faults. The dashboard's rows need a display: run it under xvfb-run
// (scripts/fault-report.sh does); without one they are left out and say so.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "fault_scenarios.hpp"
#include "fault_table.hpp"

int main(int argc, char** argv) {
  using namespace keel::fault;
  bool long_run = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--long") == 0) {
      long_run = true;
    } else {
      std::fprintf(stderr, "usage: %s [--long]\n", argv[0]);
      return 2;
    }
  }
  const bool display = std::getenv("DISPLAY") != nullptr && std::strlen(KEEL_PATH) > 0;
  const Binaries binaries{KEEL_DEMO_PATH, KEEL_CLI_PATH, display ? KEEL_PATH : ""};
  const FaultTiming timing = fault_timing(long_run);
  std::printf("faults: %.0f s undisturbed, then %.0f s of fault, then %.0f s after; keel-demo --pace 20 "
              "--width 32 --layers 1 --context 16 --batch 2 --threads 1\n\n",
              timing.baseline_secs, timing.fault_secs, timing.after_secs);
  const std::vector<Fault> faults = {Fault::kClientKilled,    Fault::kClientFrozen, Fault::kCommandFlood,
                                     Fault::kSubscriberFlood, Fault::kHostileSubscriptions,
                                     Fault::kAppKilled,       Fault::kAppFrozen,
                                     Fault::kTrainerRestarted};
  std::vector<FaultOutcome> outcomes;
  for (const Fault fault : faults) {
    if (fault_needs_app(fault) && binaries.app.empty()) {
      std::printf("%s: left out (no display; run under xvfb-run)\n\n", fault_name(fault));
      continue;
    }
    outcomes.push_back(run_fault(fault, binaries, timing));
    std::printf("%s\n", outcome_text(outcomes.back()).c_str());
    std::fflush(stdout);
  }
  std::printf("%s", table_header().c_str());
  for (const FaultOutcome& outcome : outcomes) std::printf("%s", table_row(outcome).c_str());
  bool harmless = true;
  for (const FaultOutcome& o : outcomes) {
    harmless = harmless && o.failure.empty() && o.trainer_survived && o.client_survived &&
               uint64_t(o.steps_missing) <= o.steps_dropped;
  }
  return harmless ? 0 : 1;
}
