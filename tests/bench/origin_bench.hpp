// What finding a NaN's origin costs, for keel-bench-probe (issue 28's targets): the closure form
// on normal steps (at most 0.5% over the plain probe.step(loss)), and the re-run of an unsafe
// step (at most one extra forward and backward).
//
// Three keel-demo trainers step in turn, round by round, so they share the machine's noise:
// plain (forward, backward, optimizer.step()), the plain probe.step(loss), and the closure form
// probe.step(closure). For the re-run, every other step's batch carries a NaN loss weight (the
// first of a run of unsafe steps each time): a closure-form probe runs it again traced, a
// plain one does not, and the difference is the re-run, set against a forward and backward.
// Threads: the caller's.
#pragma once

namespace keel::bench {

struct OriginCost {
  double plain_ms = 0;          // median step, no probe
  double probe_ms = 0;          // median step, probe.step(loss)
  double closure_ms = 0;        // median step, probe.step(closure)
  double closure_pct = 0;       // closure over probe.step(loss), A/B (%)
  double closure_extra_us = 0;  // the closure form's own time on the training thread, median (us)
  double forward_backward_ms = 0;   // median forward and backward, for scale
  double rerun_ms = 0;          // an unsafe step's re-run, median (closure minus plain, same batch)
  double rerun_per_forward_backward = 0;
};

OriginCost measure_origin_cost(int rounds);

}  // namespace keel::bench
