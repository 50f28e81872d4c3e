#include "flight_recorder.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <variant>

#include "keel/wire/codec.hpp"
#include "keel/wire/recording_reader.hpp"
#include "mantissa_rounding.hpp"
#include "thin_recording.hpp"

namespace keel::probe {

using wire::recording::FrameKind;

namespace {
// How long the thread sleeps when nothing comes: bounds how late a record reaches the file.
constexpr std::chrono::milliseconds kIdleWake{200};
// The stride thinning stops at: one step record in a million is left of the thinned part.
constexpr int64_t kMaxStride = int64_t{1} << 20;
}  // namespace

std::unique_ptr<FlightRecorder> FlightRecorder::start(const FlightRecorderOptions& options, std::string& error) {
  auto writer = wire::RecordingWriter::create(options.path, options.writer, error);
  if (!writer) return nullptr;
  return std::unique_ptr<FlightRecorder>(new FlightRecorder(options, std::move(writer)));
}

FlightRecorder::FlightRecorder(const FlightRecorderOptions& options, std::unique_ptr<wire::RecordingWriter> writer)
    : options_(options),
      path_(options.path),
      writer_(std::move(writer)),
      next_thin_at_(options.max_bytes),
      last_step_(options.first_step) {
  file_bytes_.store(writer_->file_bytes(), std::memory_order_relaxed);
  thread_ = std::thread([this] { run(); });
}

FlightRecorder::~FlightRecorder() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void FlightRecorder::record(const wire::Message& message, Payload payload) {
  FrameKind kind = FrameKind::run;
  if (const auto* step = std::get_if<wire::StepRecord>(&message)) {
    kind = FrameKind::step;
    last_step_ = step->step;
  } else if (const auto* event = std::get_if<wire::Event>(&message)) {
    kind = FrameKind::event;
    last_step_ = std::max(last_step_, event->step);
  } else if (!std::holds_alternative<wire::RunDescription>(message)) {
    return;   // commands and acks are not the run's history
  }
  const size_t bytes = payload ? payload->size() : 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // Descriptions and events get as much room again: without its description a record reads
    // under the wrong layers, and an event is what the morning is looking for.
    const size_t slack = kind == FrameKind::step ? 1 : 2;
    if (queue_.size() >= options_.queue_messages * slack || queued_bytes_ + bytes > options_.queue_bytes * slack) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      if (failure_.empty()) failure_ = "the disk did not keep up: the recording's queue was full";
      return;
    }
    queue_.push_back(Queued{kind, last_step_, std::move(payload)});
    queued_bytes_ += bytes;
  }
  wake_.notify_one();
}

std::string FlightRecorder::failure() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_;
}

void FlightRecorder::lost(uint64_t messages, const std::string& why) {
  if (messages == 0) return;
  dropped_.fetch_add(messages, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(mutex_);
  failure_ = why;
}

void FlightRecorder::run() {
  std::deque<Queued> batch;
  for (;;) {
    bool stopping = false;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait_for(lock, kIdleWake, [this] { return stop_ || !queue_.empty(); });
      batch.swap(queue_);
      queued_bytes_ = 0;
      stopping = stop_;
    }
    write(batch);
    batch.clear();
    if (stopping) break;
  }
  const uint64_t lost_before = writer_->lost_messages();
  writer_->close();
  lost(writer_->lost_messages() - lost_before, writer_->error());
}

void FlightRecorder::write(std::deque<Queued>& batch) {
  if (batch.empty()) return;
  const uint64_t lost_before = writer_->lost_messages();
  uint64_t refused = 0;
  for (const Queued& q : batch) {
    if (!q.payload) {
      ++refused;
      continue;
    }
    const std::vector<char>* payload = q.payload.get();
    if (q.kind == wire::recording::FrameKind::step && options_.mantissa_bits < kExactMantissaBits) {
      wire::DecodeResult d = wire::decode(payload->data(), payload->size());
      auto* record = d.ok ? std::get_if<wire::StepRecord>(&d.message) : nullptr;
      if (record != nullptr && round_layer_values(*record, options_.mantissa_bits)) {
        wire::encode(d.message, rounded_);
        payload = &rounded_;
      }
    }
    if (!writer_->append(q.kind, q.step, payload->data(), payload->size())) ++refused;
  }
  writer_->flush();
  lost(refused + writer_->lost_messages() - lost_before, writer_->error());
  file_bytes_.store(writer_->file_bytes(), std::memory_order_relaxed);
  if (options_.max_bytes > 0 && writer_->file_bytes() > next_thin_at_) thin();
}

void FlightRecorder::thin() {
  // Each pass halves what is left of the thinned part; a few passes reach half the bound.
  while (writer_->file_bytes() > options_.max_bytes / 2 && stride_ < kMaxStride) {
    std::string error;
    auto reader = wire::RecordingReader::open(path_, error);
    if (!reader || reader->chunks().empty()) break;
    const std::string copy_path = path_ + ".thinning";
    std::remove(copy_path.c_str());   // left by a recorder killed while thinning
    auto copy = wire::RecordingWriter::create(copy_path, options_.writer, error);
    if (!copy) break;
    ThinRule rule;
    rule.stride = stride_ * 2;
    rule.event_window = options_.event_window;
    rule.keep_from_step = newest_kept_whole(*reader);
    const ThinResult result = thin_recording(*reader, *copy, rule);
    if (!result.ok || result.removed_steps == 0) {
      // A full disk, or nothing left that may be thinned: the file goes on as it is.
      copy.reset();
      std::remove(copy_path.c_str());
      break;
    }
    // The old file is complete (nothing was queued in between: this is the only writer);
    // the copy holds all of it, thinned, and takes its name atomically. Should the rename
    // fail, the copy goes and the old file goes on growing.
    if (!copy->rename(path_)) {
      copy.reset();
      std::remove(copy_path.c_str());
      break;
    }
    writer_->close();   // the old file's last bytes go to its inode, which no name reaches
    writer_ = std::move(copy);
    stride_ = rule.stride;
    thinned_steps_.fetch_add(result.removed_steps, std::memory_order_relaxed);
    file_bytes_.store(writer_->file_bytes(), std::memory_order_relaxed);
  }
  next_thin_at_ = std::max<uint64_t>(options_.max_bytes, 2 * writer_->file_bytes());
}

int64_t FlightRecorder::newest_kept_whole(const wire::RecordingReader& reader) const {
  // The newest recent_steps, or fewer where their chunks would take more than a quarter of
  // the bound (a model of 50,000 layers records megabytes a step): read off the index.
  const auto& chunks = reader.chunks();
  const int64_t newest = chunks.back().last_step;
  int64_t from = newest - options_.recent_steps + 1;
  uint64_t bytes = 0;
  for (size_t i = chunks.size(); i-- > 0;) {
    bytes += wire::recording::kChunkHeaderBytes + chunks[i].stored_bytes;
    if (chunks[i].first_step <= from) break;
    if (bytes > options_.max_bytes / 4) {
      from = std::max(from, chunks[i].first_step);
      break;
    }
  }
  return from;
}

}  // namespace keel::probe
