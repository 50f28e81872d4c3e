// RecordingLoader: runs kept on disk, read on a thread of their own for the dashboard.
//
// What it is for: `keel --open FILE...` shows recorded runs in the same views as live ones.
// Each file is read by read_recording_file (recording_file.hpp), so its messages are the
// wire's own, and the UI thread drains them into the same Model a live stream feeds. A large
// recording is handed over in slices: the queue holds at most max_queued messages (the
// loader waits for the UI to drain it), and drain() gives at most max_per_drain per frame, so
// the window stays live while a long run loads.
// Threads: construct, drain(), states() and destroy on the owner (UI) thread; the reading
// thread is private. Never: throws after construction, or blocks the owner beyond a short lock.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "keel/wire/messages.hpp"
#include "values/recording_state.hpp"

namespace keel::app {

struct RecordingLoaderOptions {
  size_t max_queued = 65536;
  size_t max_per_drain = 20000;
};

class RecordingLoader {
 public:
  explicit RecordingLoader(std::vector<std::string> paths, RecordingLoaderOptions options = {});
  ~RecordingLoader();
  RecordingLoader(const RecordingLoader&) = delete;
  RecordingLoader& operator=(const RecordingLoader&) = delete;

  // Appends the next messages read, in file order (files one after another).
  void drain(std::vector<wire::Message>& out);
  // Each file's state; `done` once it is read and all of its messages were drained.
  std::vector<RecordingState> states() const;
  bool finished() const;   // every file read and every message drained

 private:
  void run(const std::vector<std::string>& paths);

  RecordingLoaderOptions options_;
  mutable std::mutex mutex_;
  std::condition_variable room_;
  std::deque<std::pair<size_t, wire::Message>> queue_;   // (file index, message)
  std::vector<RecordingState> states_;   // `done` once read; states() adds "and drained"
  std::vector<uint64_t> drained_;        // per file
  bool stop_ = false;
  bool all_read_ = false;
  std::thread thread_;
};

}  // namespace keel::app
