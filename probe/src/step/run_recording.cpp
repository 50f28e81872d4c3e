#include "run_recording.hpp"

#include <filesystem>
#include <system_error>

#include "keel/wire/codec.hpp"
#include "keel/wire/vocabulary.hpp"
#include "record/recording_path.hpp"

namespace keel::probe {

namespace {
// A disk that keeps failing is told once a minute, not at every step.
constexpr std::chrono::seconds kRecordDroppedInterval{60};
// Attempts at a free file name before giving up.
constexpr int kNameAttempts = 100;
}  // namespace

void RunRecording::start(const ProbeOptions& options, wire::RunDescription& description) {
  if (options.record_dir.empty()) return;
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path dir = fs::absolute(options.record_dir, ec);
  if (ec || (fs::create_directories(dir, ec), ec)) {
    failure_ = "cannot create the directory " + options.record_dir + ": " + ec.message();
    return;
  }
  FlightRecorderOptions ro;
  ro.max_bytes = options.record_max_bytes;
  ro.mantissa_bits = options.record_mantissa_bits;
  ro.first_step = options.first_step;
  std::string error;
  for (int attempt = 1; attempt <= kNameAttempts && !recorder_; ++attempt) {
    ro.path = (dir / recording_file_name(description.run_id, description.model, options.rank, attempt)).string();
    if (fs::exists(ro.path, ec)) continue;
    recorder_ = FlightRecorder::start(ro, error);
    if (!recorder_) break;
  }
  if (!recorder_) {
    failure_ = error.empty() ? "no free file name in " + dir.string() : error;
    return;
  }
  // The description every client is sent first says where the run is recorded; it is the
  // recording's first message too (the publisher's later ones come through its tap).
  description.recording = recorder_->path();
  recorder_->record(description, std::make_shared<const std::vector<char>>(wire::encode(description)));
}

void RunRecording::report_drops(StepEvents& events, int64_t step) {
  if (!failure_.empty()) {
    events.add(step, wire::event_kind::kRecordDropped, "",
               "this run is not recorded: " + failure_ + " (ProbeOptions::record_dir; \"\" turns recording off)");
    failure_.clear();
    return;
  }
  if (!recorder_) return;
  const uint64_t dropped = recorder_->dropped();
  if (dropped == dropped_told_) return;
  const auto now = Clock::now();
  if (last_dropped_event_ && now - *last_dropped_event_ < kRecordDroppedInterval) return;
  last_dropped_event_ = now;
  events.add(step, wire::event_kind::kRecordDropped, "",
             std::to_string(dropped - dropped_told_) + " message(s) could not be written to " + recorder_->path() +
                 " (" + std::to_string(dropped) + " so far): " + recorder_->failure() +
                 "; training goes on, and the recording has a gap");
  dropped_told_ = dropped;
}

}  // namespace keel::probe
