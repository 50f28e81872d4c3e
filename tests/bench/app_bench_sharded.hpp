// keel-bench-app's sharded-job scene (--sharded-ranks N): the dashboard watching the ranks of a
// job whose parameters are partitioned across them (FSDP), each rank's probe sending its own
// part of every layer.
//
// What it is for: what the job's row costs the UI thread. Every rank's per-layer record is
// stored as a rank's own (the same work as a single run's), and the record that completes a
// step (the last rank's) also combines the job's per-layer values from every rank's
// (combine_job_layers): the difference between the two medians is that combine. Then the
// whole dashboard's frame with the ranks strip and its job row, as in the wide mode. Every
// record here is per layer: a frame that ingests one has to combine it, which is the frame
// that matters, and a wide model's rollup steps between (--layer-detail-every) combine nothing.
// The last line is one JSON object.
// Threads: the main thread (it owns the HeadlessUi).
// Never: opens a window or a socket.
#pragma once

#include <cstdint>

namespace keel::bench {

struct ShardedOptions {
  int layers = 50000;
  int ranks = 2;
  int64_t steps = 48;   // per-layer steps stored and timed, each from every rank
  int frames = 20;
};

// Runs the scene and prints its table and JSON line; returns the process exit status.
int run_sharded_bench(const ShardedOptions& options);

}  // namespace keel::bench
