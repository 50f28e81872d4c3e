// keel-bench-app's wide mode: the dashboard of a model with tens of thousands of layers.
//
// What it is for: issue 30's "dashboard at 50,000 layers". A mixture-of-experts model's record
// is 50,000 x 6 floats; storing a million of them would take hours, so this mode stores a short
// run (1,000 steps by default) and measures there: the whole dashboard's frame (CPU, NewFrame to
// Render) with the whole run in view, the same frame when a new step arrived just before it
// (what following a live run costs), Model::bytes_used() and the process's RSS after the run,
// bytes per layer-step, and what the memory budget did (the run's full-resolution window, and
// whether the model stayed inside --memory-budget). The 8-rank scene and the latency test are
// not run here. With layer_detail_every N (--layer-detail-every), it is fed as a probe feeds a
// model this wide (ProbeOptions::layer_detail_every): per-layer records every N steps, module
// rollups between (the description names the modules, planned as the probe plans them), and
// it prints the ingest time of each kind of record. The last line is one JSON object.
// Threads: the main thread (it owns the HeadlessUi).
// Never: opens a window or a socket.
#pragma once

#include <cstdint>

namespace keel::bench {

struct WideOptions {
  int layers = 50000;
  int64_t steps = 1000;
  int frames = 20;
  // 0: every record per layer (as before the probe sent rollups); N: per layer every N steps.
  int layer_detail_every = 0;
};

// Runs the wide scene and prints its table and JSON line; returns the process exit status.
int run_wide_bench(const WideOptions& options);

}  // namespace keel::bench
