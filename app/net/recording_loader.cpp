#include "net/recording_loader.hpp"

#include <algorithm>

#include "net/recording_file.hpp"

namespace keel::app {

RecordingLoader::RecordingLoader(std::vector<std::string> paths, RecordingLoaderOptions options)
    : options_(options) {
  for (const std::string& path : paths) {
    RecordingState state;
    state.path = path;
    states_.push_back(std::move(state));
  }
  drained_.assign(states_.size(), 0);
  thread_ = std::thread([this, paths = std::move(paths)] { run(paths); });
}

RecordingLoader::~RecordingLoader() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  room_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void RecordingLoader::run(const std::vector<std::string>& paths) {
  for (size_t i = 0; i < paths.size(); ++i) {
    RecordingFileReport report;
    std::string error;
    bool stopped = false;
    const bool read = read_recording_file(
        paths[i],
        [&](wire::Message& message) {
          if (stopped) return;
          std::unique_lock<std::mutex> lock(mutex_);
          room_.wait(lock, [&] { return stop_ || queue_.size() < options_.max_queued; });
          if (stop_) {
            stopped = true;
            return;
          }
          queue_.emplace_back(i, std::move(message));
          ++states_[i].messages;
        },
        report, error);
    std::lock_guard<std::mutex> lock(mutex_);
    RecordingState& state = states_[i];
    state.done = true;
    state.error = read ? "" : error;
    state.problems = report.problems;
    state.file_bytes = report.file_bytes;
    if (stop_) return;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  all_read_ = true;
}

void RecordingLoader::drain(std::vector<wire::Message>& out) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const size_t n = std::min(queue_.size(), options_.max_per_drain);
    for (size_t i = 0; i < n; ++i) {
      ++drained_[queue_.front().first];
      out.push_back(std::move(queue_.front().second));
      queue_.pop_front();
    }
  }
  room_.notify_all();
}

std::vector<RecordingState> RecordingLoader::states() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<RecordingState> out = states_;
  for (size_t i = 0; i < out.size(); ++i) out[i].done = out[i].done && drained_[i] == out[i].messages;
  return out;
}

bool RecordingLoader::finished() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return all_read_ && queue_.empty();
}

}  // namespace keel::app
