// What noting each gradient's arrival costs a training step, for keel-bench-probe (issue 30:
// the probe at 2,000 tensors and more).
//
// keel needs the order in which backward reaches the parameters (the first non-finite layer
// in backward order). It used to take it from a tensor hook per parameter; it now hooks each
// parameter's gradient accumulator, and holds the accumulators (layout/backward_order.hpp).
// This measures the difference on keel-bench-probe's deep narrow model: one model, no probe,
// five ways of stepping it taken in turn, round by round:
//   plain: as the user's loop runs it;
//   tensor hooks: a register_hook per parameter noting the arrival, as keel used to;
//   keel's hooks: BackwardOrder, a post hook on each held accumulator;
//   held accumulators: the accumulators held, no hooks (what holding them alone changes: a
//     parameter keeps only a weak reference to its own, so a plain loop builds a new one per
//     parameter in every forward and frees it after backward);
//   keel's hooks and measurements: BackwardOrder and AccumulationStats, whose hooks measure
//     each small gradient and its weight as they accumulate (reduce/accumulation_stats.hpp):
//     all that the probe adds inside backward.
// Threads: the caller's.
#pragma once

#include <cstdint>

namespace keel::bench {

struct BackwardHookCost {
  int64_t tensors = 0;
  int rounds = 0;
  double plain_ms = 0;   // median step
  // Each way's median step over the plain one's, in percent.
  double tensor_hooks_pct = 0, keel_hooks_pct = 0, held_accumulators_pct = 0, measuring_hooks_pct = 0;
};

BackwardHookCost measure_backward_hooks(int64_t tensors, int rounds);

}  // namespace keel::bench
