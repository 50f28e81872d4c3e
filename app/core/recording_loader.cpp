#include "core/recording_loader.hpp"

#include <algorithm>
#include <utility>

#include "net/recording_file.hpp"

namespace keel::app {

RecordingLoader::RecordingLoader(RecordingLoaderOptions options) : options_(std::move(options)) {
  thread_ = std::thread([this] { run(); });
}

RecordingLoader::~RecordingLoader() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void RecordingLoader::open(const std::vector<std::string>& paths) {
  if (paths.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const std::string& path : paths) {
      RecordingState state;
      state.path = path;
      pending_.emplace_back(states_.size(), Clock::now());
      states_.push_back(std::move(state));
      taken_whole_.push_back(false);
    }
  }
  work_.notify_all();
}

bool RecordingLoader::stopping() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stop_;
}

void RecordingLoader::run() {
  for (;;) {
    std::pair<size_t, Clock::time_point> next;
    std::string path;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      reading_ = false;
      work_.wait(lock, [&] { return stop_ || !pending_.empty(); });
      if (stop_) return;
      next = pending_.front();
      pending_.pop_front();
      path = states_[next.first].path;
      reading_ = true;
    }
    read(next.first, path, next.second);
  }
}

void RecordingLoader::read(size_t index, const std::string& path, Clock::time_point asked) {
  const auto since_asked = [&] { return std::chrono::duration<double>(Clock::now() - asked).count(); };
  std::string error;
  std::unique_ptr<RecordingFile> file = RecordingFile::open(path, error);
  if (!file) {
    std::lock_guard<std::mutex> lock(mutex_);
    states_[index].error = error;
    states_[index].done = true;
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    states_[index].file_bytes = file->file_bytes();
  }
  // Checked once per message: a destroyed loader abandons the file at once.
  const auto ingest_into = [this](Model& model) {
    return [this, &model](wire::Message& message) {
      if (stopping()) return false;
      model.ingest(message);
      return true;
    };
  };

  const std::vector<wire::RecordingChunk>& chunks = file->chunks();
  FirstPictureBudget budget = options_.first_picture;
  FirstPicturePlan plan = plan_first_picture(chunks, budget);
  if (!plan.whole) {
    // How many chunks fit the first picture's time: from the time the first one takes, read
    // as the plan will read it (first chunks hold a description: walked twice).
    auto model = std::make_unique<Model>(options_.model);
    FirstPicturePlan probe = plan;
    probe.chunks = {0};
    RecordingFileReport ignored;
    const Clock::time_point start = Clock::now();
    file->read_first_picture(probe, ingest_into(*model), ignored);
    const double per_chunk = std::max(1e-5, std::chrono::duration<double>(Clock::now() - start).count());
    budget.max_chunks = std::max<size_t>(2, static_cast<size_t>(options_.first_picture_secs / per_chunk));
    plan = plan_first_picture(chunks, budget);
  }
  if (!plan.whole) {
    auto model = std::make_unique<Model>(options_.model);
    RecordingFileReport report;
    file->read_first_picture(plan, ingest_into(*model), report);
    if (stopping()) return;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      RecordingState& state = states_[index];
      state.first_picture = true;
      state.sample_stride = plan.stride;
      state.first_picture_secs = since_asked();
    }
    hand_over(index, false, std::move(model));
  }

  auto model = std::make_unique<Model>(options_.model);
  RecordingFileReport report;
  file->read_all(ingest_into(*model), report, [&](size_t done, size_t total) {
    std::lock_guard<std::mutex> lock(mutex_);
    states_[index].progress = total > 0 ? static_cast<double>(done) / static_cast<double>(total) : 1.0;
  });
  if (stopping()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    RecordingState& state = states_[index];
    state.messages = report.messages;
    state.problems = report.problems;
    state.progress = 1.0;
    state.whole_secs = since_asked();
    state.done = true;
  }
  hand_over(index, true, std::move(model));
}

void RecordingLoader::hand_over(size_t index, bool whole, std::unique_ptr<Model> model) {
  std::lock_guard<std::mutex> lock(mutex_);
  ready_.push_back(LoadedRecording{index, whole, std::move(model)});
}

void RecordingLoader::take(std::vector<LoadedRecording>& out) {
  std::lock_guard<std::mutex> lock(mutex_);
  while (!ready_.empty()) {
    if (ready_.front().whole) taken_whole_[ready_.front().file] = true;
    out.push_back(std::move(ready_.front()));
    ready_.pop_front();
  }
}

std::vector<RecordingState> RecordingLoader::states() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<RecordingState> out = states_;
  for (size_t i = 0; i < out.size(); ++i) out[i].done = out[i].done && (taken_whole_[i] || !out[i].error.empty());
  return out;
}

bool RecordingLoader::finished() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!pending_.empty() || reading_ || !ready_.empty()) return false;
  for (size_t i = 0; i < states_.size(); ++i) {
    if (!taken_whole_[i] && states_[i].error.empty()) return false;
  }
  return true;
}

}  // namespace keel::app
