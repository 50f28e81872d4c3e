// Throughput of the probe's fused gradient pass, against memcpy of the same bytes.
//
// What it is for: DESIGN.md §2 budgets the CPU gradient pass at about 0.7x memcpy bandwidth;
// this measures both on the current machine so the benchmark program can report the ratio.
// Threads: call from one thread; the reduction itself uses the OpenMP pool, memcpy one thread.
// Never: touches torch; it allocates its buffers (2 x bytes) per call, outside the timings.
#pragma once

#include <cstdint>

namespace keel::bench {

struct ReduceBandwidth {
  double reduce_gbps = 0;  // bytes of float32 gradient read per second by grad_stats, / 1e9
  double memcpy_gbps = 0;  // bytes copied per second by one std::memcpy of the same size, / 1e9
  double ratio = 0;        // reduce_gbps / memcpy_gbps
};

// Median over `repeats` timed runs (after one warm-up) of FusedReducer::grad_stats over
// `bytes` of float32 split into 200 tensors of mixed sizes, as a model's parameters are
// (large matrices, medium projections, tiny biases and norm scales), and of memcpy of the same
// bytes into a second, already-touched buffer. bytes below 4 or repeats below 1 give zeros.
ReduceBandwidth measure_reduce_bandwidth(int64_t bytes, int repeats);

}  // namespace keel::bench
