// RecordingLoader: runs kept on disk, read on a thread of their own into models the UI takes.
//
// What it is for: `keel --open FILE...`, File > Open and a dropped file show recorded runs in
// the same views as live ones, and a live run's own recording gives it back the history its
// probe no longer keeps. The loader's thread reads each file (recording_file.hpp: the wire's
// own messages, decoded by the same wire::decode) into a Model of its own, built there, so the
// UI thread never stores a recorded sample: it takes each finished model whole (take()) and
// adopts its runs (Model::adopt_runs()), a pointer swap per run.
// Each file is handed over once or twice:
//   - a recording larger than the first picture's budget first as a sample of itself
//     (first_picture.hpp), within about first_picture_secs, so the whole run is on screen at
//     once; the sample's size is set from the time its first chunk took to read;
//   - then whole, which replaces the sample.
// Memory: at most the model being built and the ones not yet taken (the UI takes them every
// frame), each bounded by ModelConfig as the app's own model is.
// Threads: construct, open(), take(), states(), finished() and destroy on the owner (UI)
// thread; the reading thread is private. Never: throws after construction, or blocks the owner
// beyond a short lock; a file being read when the loader is destroyed is abandoned at once.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "model/model.hpp"
#include "net/first_picture.hpp"
#include "values/recording_state.hpp"

namespace keel::app {

struct RecordingLoaderOptions {
  // The app model's: a model built here is bounded as that one is.
  ModelConfig model;
  FirstPictureBudget first_picture;
  // Time the first picture of a large recording may take to read; its chunk count is set
  // from the time the first chunk took.
  double first_picture_secs = 1.0;
};

// A model built from one file, for the UI thread to adopt.
struct LoadedRecording {
  size_t file = 0;       // index into states()
  bool whole = false;    // false: the first picture (a sample); the whole file follows
  std::unique_ptr<Model> model;
};

class RecordingLoader {
 public:
  explicit RecordingLoader(RecordingLoaderOptions options = {});
  ~RecordingLoader();
  RecordingLoader(const RecordingLoader&) = delete;
  RecordingLoader& operator=(const RecordingLoader&) = delete;

  // Asks for more files, read after those already asked for; each gets the next index in
  // states().
  void open(const std::vector<std::string>& paths);
  // Moves every model built since the last call into `out`, in the order they were built.
  void take(std::vector<LoadedRecording>& out);
  // Each file's state; `done` once it is read whole and that model was taken.
  std::vector<RecordingState> states() const;
  // Every file asked for is read whole (or could not be) and taken.
  bool finished() const;

 private:
  using Clock = std::chrono::steady_clock;
  void run();
  void read(size_t index, const std::string& path, Clock::time_point asked);
  void hand_over(size_t index, bool whole, std::unique_ptr<Model> model);
  bool stopping() const;

  RecordingLoaderOptions options_;
  mutable std::mutex mutex_;
  std::condition_variable work_;
  std::deque<std::pair<size_t, Clock::time_point>> pending_;   // file index, when asked
  std::vector<RecordingState> states_;   // `done` once read; states() adds "and taken"
  std::vector<bool> taken_whole_;
  std::deque<LoadedRecording> ready_;
  bool reading_ = false;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace keel::app
