// What authenticated telemetry costs the trainer's process, for keel-bench-probe (PROTOCOL §6).
//
// The probe's Publisher sends step records of `layers` layers to one subscriber in another
// process (this benchmark re-run as a reader: its CPU is not the trainer's), with no keys and
// then with CURVE (the user's own key pair, the default), interleaved. It measures the
// publishing process's CPU time (getrusage: the training thread's enqueue, the publisher
// thread's encode and send, ZeroMQ's I/O thread, which seals each frame under CURVE) per
// record sent. The records are paced so the ring never drops one.
// Threads: the caller's; the Publisher runs its own.
#pragma once

#include <cstddef>
#include <string>

namespace keel::bench {

struct TelemetryCost {
  size_t layers = 0;
  size_t record_bytes = 0;        // one encoded step record
  double plain_us_per_record = 0; // process CPU per record, no keys
  double curve_us_per_record = 0; // the same with CURVE
  int records = 0;                // per mode and round
  std::string error;              // why it could not be measured; "" when it was
};

// `self` is this executable (the reader is the same binary with kTelemetryReaderFlag).
TelemetryCost measure_telemetry_cost(const std::string& self, size_t layers, int records, int rounds);

// argv[1] of the reader process; then the endpoint and "curve" or "plain".
inline constexpr const char* kTelemetryReaderFlag = "--telemetry-reader";
// The reader: subscribes, prints "ready" on its first message, reads until killed.
int run_telemetry_reader(const std::string& endpoint, bool curve);

}  // namespace keel::bench
