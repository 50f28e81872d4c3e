// FlightRecorder: the probe's recording of its run on disk, written by a thread of its own.
//
// What it is for: nobody watches the run at 3 AM. Every run description, step record and
// event the probe publishes goes, as the publisher encoded it, into one recording file
// (keel/wire/recording_format.hpp) that the dashboard and keel-cli open the next morning.
// The publisher's thread hands each encoded message over (record()); this thread appends it
// and flushes after every batch, so a trainer killed at any moment leaves a file that opens
// up to its last flushed record.
// Bounded disk: past max_bytes the file is thinned in place (thin_recording.hpp): older step
// records are kept one in `stride` (2, 4, 8, ... as the run grows), every step near an event
// and the newest steps (recent_steps, or as many as fit in a quarter of max_bytes) are kept
// whole, and no description or event is ever dropped. The thinned copy is written beside the
// file and renamed over it, so the file is whole at every moment. Where what may not be
// dropped outgrows the bound (an event storm), the next thinning waits until the file has
// doubled, so a file that cannot shrink is not rewritten at every batch.
// Bounded memory: at most queue_messages messages (queue_bytes bytes) wait for the thread;
// a step record beyond that is dropped and counted (dropped()); descriptions and events may
// go past the count by as many again, since a record read under the wrong layers is worse
// than a lost one. A failed write (a full disk) loses what it was writing, counted the same.
// Threads: record() from one producer thread (the publisher's); dropped(), failure() and
// the rest from any thread. Never: blocks record() beyond a short lock, throws after start(),
// or writes anywhere but its own file and the thinned copy beside it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "keel/wire/messages.hpp"
#include "keel/wire/recording_reader.hpp"
#include "keel/wire/recording_writer.hpp"

namespace keel::probe {

struct FlightRecorderOptions {
  std::string path;                  // the file to create (never an existing one)
  uint64_t max_bytes = uint64_t{1} << 30;
  size_t queue_messages = 4096;
  size_t queue_bytes = size_t{64} << 20;
  // Steps each side of an event that thinning keeps, and the newest steps it never thins.
  int64_t event_window = 64;
  int64_t recent_steps = 4096;
  // The step given to run descriptions recorded before any step record or event.
  int64_t first_step = 0;
  // Float32 mantissa bits kept of step records' layer values (mantissa_rounding.hpp): below
  // 23, each step record is decoded, rounded and encoded again on this thread.
  int mantissa_bits = 23;
  wire::RecordingWriterOptions writer;
};

class FlightRecorder {
 public:
  // Creates the file and starts the thread; nullptr with `error` set when the file cannot be
  // created (the run then goes on unrecorded: the probe says so in an event).
  static std::unique_ptr<FlightRecorder> start(const FlightRecorderOptions& options, std::string& error);
  // Records what was queued, closes the file and ends the thread.
  ~FlightRecorder();
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  using Payload = std::shared_ptr<const std::vector<char>>;
  // Queues one published message (its encoded payload, shared with the publisher's ring).
  void record(const wire::Message& message, Payload payload);

  const std::string& path() const { return path_; }
  // Messages never written: refused by the full queue, or lost to a failed write.
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }
  // Why the last messages were lost ("cannot write ...: No space left on device"); "" if none.
  std::string failure() const;
  // Step records thinning has removed so far.
  uint64_t thinned_steps() const { return thinned_steps_.load(std::memory_order_relaxed); }
  // Bytes the file holds now (after the last flush).
  uint64_t file_bytes() const { return file_bytes_.load(std::memory_order_relaxed); }

 private:
  struct Queued {
    wire::recording::FrameKind kind;
    int64_t step;
    Payload payload;
  };
  FlightRecorder(const FlightRecorderOptions& options, std::unique_ptr<wire::RecordingWriter> writer);
  void run();
  void write(std::deque<Queued>& batch);
  // Thins the file until it holds at most half of max_bytes, or no step is left to thin.
  void thin();
  // The first step thinning keeps whole (recent_steps, bounded by a quarter of max_bytes).
  int64_t newest_kept_whole(const wire::RecordingReader& reader) const;
  void lost(uint64_t messages, const std::string& why);

  FlightRecorderOptions options_;
  const std::string path_;
  std::unique_ptr<wire::RecordingWriter> writer_;   // the recorder thread's
  int64_t stride_ = 1;                              // recorder thread: of the thinned part
  uint64_t next_thin_at_;                           // recorder thread: file bytes that thin
  int64_t last_step_;                               // producer: of the last record or event

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Queued> queue_;
  std::vector<char> rounded_;   // the thread's scratch: a step record re-encoded rounded
  size_t queued_bytes_ = 0;
  bool stop_ = false;
  std::string failure_;

  std::atomic<uint64_t> dropped_{0};
  std::atomic<uint64_t> thinned_steps_{0};
  std::atomic<uint64_t> file_bytes_{0};
  std::thread thread_;
};

}  // namespace keel::probe
