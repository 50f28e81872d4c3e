// thin_recording: a copy of a recording with fewer of its older step records, for the flight
// recorder's disk bound (flight_recorder.hpp).
//
// What is kept: every run description and every event; every step record at or after
// keep_from_step (the newest steps); every step record within event_window steps of an
// event; and of the rest, the records whose step is a multiple of `stride`. A chunk that
// fails to decode is left out, and counted in the result.
// Threads: any; reads `from`, writes `to`. Never throws.
#pragma once

#include <cstdint>
#include <string>

#include "keel/wire/recording_reader.hpp"
#include "keel/wire/recording_writer.hpp"

namespace keel::probe {

struct ThinRule {
  int64_t stride = 2;
  int64_t event_window = 64;
  int64_t keep_from_step = 0;
};

struct ThinResult {
  bool ok = true;             // false: `to` failed (error says why)
  std::string error;
  uint64_t kept_steps = 0;
  uint64_t removed_steps = 0;
  uint64_t damaged_chunks = 0;
};

ThinResult thin_recording(const wire::RecordingReader& from, wire::RecordingWriter& to, const ThinRule& rule);

}  // namespace keel::probe
