// What rewind's snapshots cost keel-demo's step (keel-bench-probe; docs/rewind.md): the
// probe's time at the steps that take a snapshot against the others', as a share of the step
// amortised over rewind_every steps, and the pause of one rewind by command.
#pragma once

#include <cstdint>
#include <string>

namespace keel::bench {

struct SnapshotCost {
  int64_t every = 0;
  int64_t steps = 0;
  double step_ms = 0;          // median step, snapshots not due
  double snapshot_ms = 0;      // a snapshot's own time on the training thread (median)
  double share_pct = 0;        // snapshot_ms / (every * step_ms)
  double rewind_step_ms = 0;   // the step that took a rewind command, all of it
  double rewind_pause_ms = 0;  // of which the rewind's own pause, as its event tells it
  std::string error;           // why the rewind was not measured ("" when it was)
};

SnapshotCost measure_snapshot_cost(int64_t every, int64_t steps);

}  // namespace keel::bench
