// recording_file: the messages of a run kept on disk, read back in order.
//
// What it is for: `keel --open` and `keel-cli export|summary|...` read a run from a file as
// they would from a probe: the wire's messages, decoded by the same wire::decode, for the same
// model code. Two kinds of file:
//   - a recording (the flight recorder's or `keel-cli record`'s, PROTOCOL §10), whatever its
//     name; damage and a cut-off end are read past as far as the reader can, and said;
//   - a dump's telemetry.msgpack (payloads back to back, PROTOCOL §6), with the run.msgpack
//     beside it read first, so its records meet their layers.
// Threads: any; a plain function. Never throws; reads nothing but `path` (and run.msgpack
// beside a telemetry.msgpack).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "keel/wire/messages.hpp"

namespace keel::app {

struct RecordingFileReport {
  std::string kind;                     // "recording" or "dump telemetry"
  uint64_t messages = 0;                // decoded and handed over
  uint64_t undecodable = 0;             // frames or payloads skipped
  uint64_t file_bytes = 0;
  std::vector<std::string> problems;    // what was skipped, in words
};

// Calls `message` for every message of the file, in order. False, with `error` set and
// nothing handed over, when the file cannot be read or is neither kind.
bool read_recording_file(const std::string& path, const std::function<void(wire::Message&)>& message,
                         RecordingFileReport& report, std::string& error);

}  // namespace keel::app
