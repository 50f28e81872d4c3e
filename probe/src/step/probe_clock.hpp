// The probe's clocks: a steady one for the durations it measures (ProbeTiming, intervals between
// dumps and events), and the wall clock records and events are stamped with.
// Thread: any. Never: allocates or blocks.
#pragma once

#include <chrono>
#include <cstdint>

namespace keel::probe {

using Clock = std::chrono::steady_clock;

// Wall-clock time for records and events, in ns since the Unix epoch.
inline int64_t unix_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

inline double micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

}  // namespace keel::probe
