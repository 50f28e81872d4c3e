// The probe's host cost per tensor, for keel-bench-probe (issue 30's targets: +2% at most on a
// 2,000-tensor deep narrow model, and a cost per tensor per step flat within 1.5x from 42 to
// 50,000 tensors).
//
// A deep narrow model of N tensors (N/2 Linear(16, 16) layers, each a weight and a bias, on
// the CPU, one intra-op thread, SGD) trains three times: plain (optimizer.step()), with the
// probe's defaults but recording and dumps (a publisher, the command socket, the ring; a ring
// of 8 records, 2 above 10,000 tensors, which the warm-up rounds fill, so that what is
// measured is the steady state a real run reaches after its first 256 steps), and so again
// with small gradients measured the other way from the default's choice (in the accumulators'
// hooks inside backward, or all by the pass after it: ProbeOptions::measure_in_backward); and
// a fourth copy trains plain beside the first, whose A/B against it (A/A) is the
// measurement's own floor. The four step in turn, two steps a turn of which the second is
// measured (it follows its own way's step, as in a real run), round by round, and swap roles
// halfway (the probed copy and the plain one, the other two likewise), so that no
// A/B is one copy's placement in memory. Per N: the median step of each and the A/B, the
// probe's own time on the training thread (ProbeTiming), its reductions' share, and both over
// N: the cost per tensor. The reductions read every value, so their per-tensor cost grows with the
// tensor's size; the rest (hooks, arrival order, the layout check, building the record, the
// decision) is what must stay flat.
// Threads: the caller's (the probes start their own).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace keel::bench {

struct TensorCountCost {
  int64_t tensors = 0;
  int rounds = 0;
  double plain_ms = 0, probed_ms = 0;   // median step
  double overhead_pct = 0;              // (probed - plain) / plain, the mean of the two halves'
  // Whether the defaults measure small gradients in backward (ProbeOptions::measure_in_backward
  // unset: measures_in_backward), and the other way (the option set to the opposite): its A/B
  // against the same plain steps, and its probe_us.
  bool default_in_backward = false;
  double other_overhead_pct = 0, other_probe_us = 0;
  // A second plain copy against the first (A/A): what the A/B reads with no probe at all.
  double control_pct = 0;
  double probe_us = 0;                  // median ProbeTiming::probe_us
  double reduce_us = 0;                 // median ProbeTiming::reduce_us
  double probe_ns_per_tensor = 0;       // probe_us / tensors
  double outside_ns_per_tensor = 0;     // (probe_us - reduce_us) / tensors
  // Where the probe's time went (ProbeTiming's stages), median ns per tensor: what grows with
  // the count is what to cut next.
  double begin_ns = 0, layout_ns = 0, grads_ns = 0, update_ns = 0, record_ns = 0, end_ns = 0;
  double backward_ns = 0;   // of grads_ns: measuring small gradients inside backward
};

// One row per count in `tensors` (rounded down to an even count), `rounds` measured rounds
// each (above 10,000 tensors two thirds of them, at least 10, after fewer warm-up rounds).
std::vector<TensorCountCost> measure_tensor_counts(const std::vector<int64_t>& tensors, int rounds);

// The wire at a mixture of experts' width (issue 30, part 2): `blocks` blocks of `experts`
// experts, each two bias-free Linear(4, 4) (up, down), 2 x blocks x experts tensors, one copy
// probed with the defaults (per-layer values every layer_detail_every steps, module rollups
// between) and one sent per layer at every step (layer_detail_above 0), stepping in turn.
struct WideWireCost {
  int64_t tensors = 0;
  size_t modules = 0;                   // in the run description
  int steps = 0;                        // measured steps of each probe
  double rollup_bytes_per_step = 0;     // mean encoded step record, defaults
  double per_layer_bytes_per_step = 0;  // mean encoded step record, every step per layer
  double rollup_probe_us = 0;           // median ProbeTiming::probe_us, defaults
  double per_layer_probe_us = 0;        // the same, every step per layer
};
WideWireCost measure_wide_wire(int blocks, int experts, int steps);

}  // namespace keel::bench
