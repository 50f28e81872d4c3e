// recording_file: the messages of a run kept on disk, read back in order.
//
// What it is for: `keel --open` and `keel-cli export|summary|...` read a run from a file as
// they would from a probe: the wire's messages, decoded by the same wire::decode, for the same
// model code. Two kinds of file:
//   - a recording (the flight recorder's or `keel-cli record`'s, PROTOCOL §10), whatever its
//     name; damage and a cut-off end are read past as far as the reader can, and said. Its
//     chunk index lets the dashboard read a sample of it first (first_picture.hpp);
//   - a dump's telemetry.msgpack (payloads back to back, PROTOCOL §6), with the run.msgpack
//     beside it read first, so its records meet their layers. It is read whole at open.
// Threads: a RecordingFile is used by one thread at a time. Never throws; reads nothing but
// `path` (and run.msgpack beside a telemetry.msgpack).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "keel/wire/messages.hpp"
#include "keel/wire/recording_reader.hpp"
#include "net/first_picture.hpp"

namespace keel::app {

struct RecordingFileReport {
  std::string kind;                     // "recording" or "dump telemetry"
  uint64_t messages = 0;                // decoded and handed over
  uint64_t undecodable = 0;             // frames or payloads skipped
  uint64_t file_bytes = 0;
  std::vector<std::string> problems;    // what was skipped, in words
};

class RecordingFile {
 public:
  // Takes each message in file order; returns false to stop reading.
  using MessageFn = std::function<bool(wire::Message&)>;
  // After each chunk read (a dump's telemetry: one), how many of how many.
  using ProgressFn = std::function<void(size_t done, size_t total)>;

  // nullptr, with `error` set, when the file cannot be read or is neither kind.
  static std::unique_ptr<RecordingFile> open(const std::string& path, std::string& error);
  ~RecordingFile();

  const std::string& kind() const { return kind_; }
  uint64_t file_bytes() const { return file_bytes_; }
  // What open() had to skip, in words (a cut-off end, damage).
  const std::vector<std::string>& warnings() const { return warnings_; }
  // The recording's chunk index; empty for a dump's telemetry.
  const std::vector<wire::RecordingChunk>& chunks() const;

  // Every message, in order, into `report` (counts and problems added to what it holds).
  void read_all(const MessageFn& message, RecordingFileReport& report, const ProgressFn& progress = {}) const;
  // The messages `plan` keeps (a recording's; a dump's telemetry is always read whole).
  void read_first_picture(const FirstPicturePlan& plan, const MessageFn& message, RecordingFileReport& report,
                          const ProgressFn& progress = {}) const;

 private:
  RecordingFile() = default;
  // Decodes one frame's payload and hands it over; false when `message` says stop.
  bool hand_over(const wire::RecordingFrame& frame, const MessageFn& message, RecordingFileReport& report) const;

  std::string path_;
  std::string kind_;
  uint64_t file_bytes_ = 0;
  std::vector<std::string> warnings_;
  std::unique_ptr<wire::RecordingReader> reader_;   // a recording
  std::vector<wire::Message> telemetry_;            // a dump's, decoded at open
  RecordingFileReport telemetry_report_;            // what decoding it found
};

// Calls `message` for every message of the file, in order. False, with `error` set and
// nothing handed over, when the file cannot be read or is neither kind.
bool read_recording_file(const std::string& path, const std::function<void(wire::Message&)>& message,
                         RecordingFileReport& report, std::string& error);

}  // namespace keel::app
