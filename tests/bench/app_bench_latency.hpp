// Step-to-pixel latency: from the probe stamping a step to the end of the frame that draws it.
//
// What it is for: the dashboard's end-to-end delay on one machine, through the real pieces: a
// publisher thread standing in for the probe's (a ZeroMQ PUB socket on loopback sending
// encoded run descriptions and step records, each stamped just before it is encoded, as the
// probe stamps a finished step), the app's Receiver thread, and the app's own UI loop: its
// FramePacer woken by the receiver's data hook (a condition variable stands in for the GLFW
// event wait, with no input ever arriving), then its frame work (AppCore::frame: drain, ingest,
// build the whole dashboard) between NewFrame and Render. A step's latency is the wall time at which the
// first frame that ingested it finished Render, minus its stamp; the GL draw and buffer swap
// that follow are not counted.
// A backlog of 1,000 steps goes first, unmeasured, so the view is full from the first measured
// step on, as in a run that has been going for a while.
// Threads: call from the thread that owns the HeadlessUi; it starts and joins the publisher.
// Never: leaves a thread running; gives up (steps_drawn < steps_published) after the publishing
// time plus a few seconds rather than hanging.
#pragma once

#include <cstdint>

#include "app_bench_frame.hpp"

namespace keel::bench {

struct LatencyResult {
  int steps_published = 0;
  int steps_drawn = 0;
  double p50_ms = 0;
  double p99_ms = 0;
  double max_ms = 0;
  double queued_p50_ms = 0;      // stamp to the start of the frame that picked the step up
  double frame_cpu_ms_median = 0;
  double frame_interval_ms = 0;  // median time between frame starts
  uint64_t queue_dropped = 0;    // the receiver's drops (the UI fell behind)
};

// Publishes `steps_per_s` records of `layer_count` layers for `seconds` and measures each.
LatencyResult measure_step_to_pixel(HeadlessUi& ui, int layer_count, double steps_per_s, double seconds);

}  // namespace keel::bench
