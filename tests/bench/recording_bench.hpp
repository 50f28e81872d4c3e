// What the flight recorder costs, for keel-bench-probe (issue 29's targets: at most 0.2% of
// the step on the training thread, and the bytes on disk per layer-step).
//
// keel-demo's trainer runs twice, with the probe's defaults (publisher, command socket, ring)
// and recording on, and the same with recording off; the two step in turn, round by round,
// so they share the machine's noise. The probe's own time on the training thread (ProbeTiming)
// is compared, and the whole step too: the recorder's thread compresses on a core the
// training job may want. Bytes per layer-step are the file's size at the end over the steps
// recorded times the model's layers (six metrics each); per sample, over one metric. A third
// trainer, the same run, records with rounded values (ProbeOptions::record_mantissa_bits):
// its bytes per layer-step are given beside the exact recording's.
// Threads: the caller's (the probes start their own).
#pragma once

#include <cstdint>
#include <string>

namespace keel::bench {

struct RecordingCost {
  double step_on_ms = 0, step_off_ms = 0;       // median step, recording on / off
  double step_pct = 0;                          // (on - off) / off
  double probe_on_us = 0, probe_off_us = 0;     // median probe time on the training thread
  double training_thread_pct = 0;               // (probe_on - probe_off) / step_off
  uint64_t file_bytes = 0;
  int64_t steps = 0;
  int64_t layers = 0;
  double bytes_per_layer_step = 0;
  double bytes_per_sample = 0;
  uint64_t dropped = 0;
  // The same run recorded with ProbeOptions::record_mantissa_bits = rounded_mantissa_bits.
  int rounded_mantissa_bits = 0;
  uint64_t rounded_file_bytes = 0;
  double rounded_bytes_per_layer_step = 0;
};

// The mantissa bits the rounded recording keeps: 0.2% relative precision.
inline constexpr int kRoundedMantissaBits = 8;

RecordingCost measure_recording_cost(int rounds, const std::string& scratch_dir);

}  // namespace keel::bench
