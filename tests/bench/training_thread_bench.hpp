// Where the probe's time on the training thread goes, outside the reductions, for
// keel-bench-probe (issue 28's target: at most 50 us on keel-demo's model).
//
// keel-demo's trainer runs one probe per configuration, each adding one part of the probe's
// work to the last: no telemetry (the step's own bookkeeping: layout and buffer checks, plan,
// decision, record building), then a publisher, then the command socket and the history ring
// (the defaults), then a watched tensor (keel-demo's logits), then the flight recorder (into
// ./keel-bench-runs/). The configurations step in turn,
// round by round, so they share the machine's noise; each row is the median over its steps of
// ProbeTiming's probe_us - reduce_us (the probe's own time outside the reductions).
// Threads: the caller's.
#pragma once

#include <string>
#include <vector>

namespace keel::bench {

struct TrainingThreadCost {
  std::string configuration;
  double outside_us = 0;   // median probe_us - reduce_us
  double reduce_us = 0;    // median reduce_us, for scale
};

std::vector<TrainingThreadCost> measure_training_thread(int rounds);

}  // namespace keel::bench
