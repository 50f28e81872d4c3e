// The cost and speed of trainer control, for keel-bench-probe (issue: trainer control).
//
// - command round trip: a DEALER client sends a command that the training thread applies at
//   a step boundary ("policy skip_nonfinite on": no effect on training) while a keel-demo
//   trainer steps at a fixed rate, and times send -> ack, and the boundary that applied the
//   command -> ack (keel's own part; the rest is waiting for the next step);
// - dump vs write: a dump of keel-demo's model and AdamW state (capture on the training
//   thread + the writer's fsync'ed files + rename) against writing the same number of bytes
//   to one file with write + fsync;
// - control overhead: two identical probed trainers in alternating order, one with the
//   history ring and the command socket, one with neither (both publish telemetry).
// Threads: the caller's (the round trip runs a training thread and a client thread).
#pragma once

#include <string>
#include <vector>

namespace keel::bench {

struct RoundTrip {
  double p50_ms = 0;
  double p99_ms = 0;
  double max_ms = 0;
  double step_interval_ms = 0;
  int samples = 0;
  // From the boundary of the step that applied the command to the ack in the client's hands:
  // the part of the round trip that is keel's, not the wait for the step clock.
  double after_boundary_p50_ms = 0;
  double after_boundary_p99_ms = 0;
  double after_boundary_max_ms = 0;
  int after_boundary_samples = 0;
};
RoundTrip measure_command_round_trip(double steps_per_s, int samples);

struct DumpSpeed {
  double dump_mb_per_s = 0;    // bytes of the dump / (capture + write) time
  double write_mb_per_s = 0;   // the same bytes, one plain file, write + fsync
  double ratio = 0;            // dump / write
  double capture_ms = 0;       // of which on the training thread
  double bytes = 0;
};
DumpSpeed measure_dump_speed(const std::string& dir, int repeats);

struct ControlOverhead {
  double with_ms = 0;          // median step, ring + command socket
  double without_ms = 0;       // median step, neither
  double pct = 0;
};
ControlOverhead measure_control_overhead(int rounds);

double median_of(std::vector<double> values);
double percentile_of(std::vector<double> values, double fraction);

}  // namespace keel::bench
