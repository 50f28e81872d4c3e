// RecordingWriter: appends wire messages to a recording file (recording_format.hpp).
//
// What it is for: the one writer of the format, under the probe's flight recorder thread and
// `keel-cli record`. Messages are appended to the open chunk (compressed as they come) and
// reach the file at flush(): a process killed after a flush leaves a file that a reader opens
// up to that flush, and one killed inside a flush loses only what that flush was writing.
// A chunk closes, and a new one opens, once its raw frames reach the chunk target.
// A failed write (a full disk) is reported, never retried in a loop: the messages that flush
// was writing are lost (lost_messages()), the file is cut back to its last good byte and the
// chunk is closed as cut short; the next append opens a new chunk, so the file stays readable.
// Threads: one thread at a time (not thread-safe). Never throws; never fsyncs (a crash of the
// machine, not of the process, may lose what the kernel had not yet written).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "keel/wire/recording_format.hpp"

namespace keel::wire {

struct RecordingWriterOptions {
  // zstd when this build has it (recording_codec_available), else none.
  recording::Codec codec = recording::Codec::zstd;
  int zstd_level = 3;
  // A chunk closes once its raw frames reach this many bytes (at most kMaxChunkTarget).
  size_t chunk_target_bytes = 1u << 20;
};

// Whether this build can write and read chunks of `codec` (zstd is optional at build time).
bool recording_codec_available(recording::Codec codec);

class RecordingWriter {
 public:
  // Creates `path` (never replaces an existing file) and writes the file header; nullptr with
  // `error` set when it cannot.
  static std::unique_ptr<RecordingWriter> create(const std::string& path, const RecordingWriterOptions& options,
                                                 std::string& error);
  ~RecordingWriter();   // close()
  RecordingWriter(const RecordingWriter&) = delete;
  RecordingWriter& operator=(const RecordingWriter&) = delete;

  // Appends one message's payload, as encoded for the wire, as a frame of `kind` at `step`.
  // False (nothing appended, error() set) for a payload over kMaxPayloadBytes or after close().
  bool append(recording::FrameKind kind, int64_t step, const void* payload, size_t size);
  // Writes everything appended since the last flush to the file. False when a write failed:
  // those messages are lost (added to lost_messages()) and error() says why.
  bool flush();
  // Moves the file to `to` (rename(2): atomic, replacing a file there) and goes on writing it
  // there. False with error() set when the rename fails; the file is then where it was.
  bool rename(const std::string& to);
  // Flushes, closes the open chunk (fills in its header) and the file. Idempotent.
  bool close();

  uint64_t file_bytes() const;          // bytes in the file so far
  uint64_t lost_messages() const;       // appended but never written, over the writer's life
  uint64_t written_messages() const;    // in the file
  const std::string& error() const;     // the last failure; "" when none
  const std::string& path() const;

 private:
  struct State;
  explicit RecordingWriter(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace keel::wire
