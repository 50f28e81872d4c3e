// RecordingReader: indexes a recording file and gives back its frames (recording_format.hpp).
//
// What it is for: the one reader of the format, under the dashboard's recording view and
// `keel-cli export|summary`. open() reads the file header and hops from chunk header to chunk
// header (one small read each, bodies untouched) to build the index; read_chunk() decodes one
// chunk's frames, each the payload of one wire message for wire::decode.
// Damage: a file that is not a recording, or of another major version, is refused with a
// clear error. A file cut short (a trainer killed mid-write) or damaged after some chunks
// opens with what comes before the damage, and warnings() says what was skipped.
// Never: crashes, reads past the file, or allocates beyond the format's limits on any input,
// however hostile (tests/fuzz/fuzz_recording.cpp).
// Threads: open() on any thread; a reader is then read-only, and read_chunk() may be called
// from several threads at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "keel/wire/recording_format.hpp"

namespace keel::wire {

struct RecordingChunk {
  uint64_t offset = 0;             // of its header in the file
  recording::Codec codec = recording::Codec::none;
  uint8_t flags = 0;               // recording::kChunk*
  uint32_t stored_bytes = 0;       // body as stored
  uint32_t raw_bytes = 0;          // body decoded (of an open chunk: what decodes)
  uint32_t messages = 0;           // whole frames
  int64_t first_step = 0;          // least and greatest step of its frames
  int64_t last_step = 0;
  // Open (the writer was killed, or is writing) or cut short (a write failed): decoded as far
  // as it goes, and its counts and steps learnt from that at open().
  bool open = false;
  uint32_t crc32 = 0;              // of the stored body; checked for closed chunks
};

struct RecordingFrame {
  recording::FrameKind kind = recording::FrameKind::step;
  int64_t step = 0;
  const char* data = nullptr;      // the wire payload, valid during the callback only
  size_t size = 0;
};

class RecordingReader {
 public:
  // nullptr with `error` set when `path` cannot be read or is not a recording this keel reads.
  static std::unique_ptr<RecordingReader> open(const std::string& path, std::string& error);
  // The same over bytes in memory (tests, the fuzzer).
  static std::unique_ptr<RecordingReader> open_bytes(std::vector<char> bytes, std::string& error);
  ~RecordingReader();
  RecordingReader(const RecordingReader&) = delete;
  RecordingReader& operator=(const RecordingReader&) = delete;

  uint16_t major_version() const;
  uint16_t minor_version() const;
  int64_t created_unix_ms() const;
  uint64_t file_bytes() const;
  const std::vector<RecordingChunk>& chunks() const;
  // What open() had to skip, in words ("the file ends inside a record: the writer was
  // killed mid-write; 1 partial record skipped"); empty for an intact file.
  const std::vector<std::string>& warnings() const;

  // Calls `frame` for each whole frame of chunks()[index], in order. False with `error` set
  // when the chunk is damaged; the frames before the damage were given.
  bool read_chunk(size_t index, const std::function<void(const RecordingFrame&)>& frame,
                  std::string& error) const;
  // Every frame of the file in order; the chunks that fail are skipped and their errors
  // collected in `errors` (when given).
  void read_all(const std::function<void(const RecordingFrame&)>& frame,
                std::vector<std::string>* errors = nullptr) const;
  // The first chunk whose last_step >= step; chunks().size() when none.
  size_t chunk_at_step(int64_t step) const;

 private:
  struct State;
  explicit RecordingReader(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace keel::wire
