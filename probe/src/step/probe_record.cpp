// Probe::Impl's flight recorder: where the run's recording goes, and what is told when it
// loses records (record/flight_recorder.hpp).
#include <filesystem>
#include <system_error>

#include "keel/wire/codec.hpp"
#include "probe_impl.hpp"
#include "record/recording_path.hpp"

namespace keel::probe {

namespace {
// A disk that keeps failing is told once a minute, not at every step.
constexpr std::chrono::seconds kRecordDroppedInterval{60};
// Attempts at a free file name before giving up.
constexpr int kNameAttempts = 100;
}  // namespace

void Probe::Impl::start_recording() {
  if (options_.record_dir.empty()) return;
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path dir = fs::absolute(options_.record_dir, ec);
  if (ec || (fs::create_directories(dir, ec), ec)) {
    recording_failure_ = "cannot create the directory " + options_.record_dir + ": " + ec.message();
    return;
  }
  FlightRecorderOptions ro;
  ro.max_bytes = options_.record_max_bytes;
  ro.mantissa_bits = options_.record_mantissa_bits;
  ro.first_step = options_.first_step;
  std::string error;
  for (int attempt = 1; attempt <= kNameAttempts && !recorder_; ++attempt) {
    ro.path = (dir / recording_file_name(description_.run_id, description_.model, options_.rank, attempt)).string();
    if (fs::exists(ro.path, ec)) continue;
    recorder_ = FlightRecorder::start(ro, error);
    if (!recorder_) break;
  }
  if (!recorder_) {
    recording_failure_ = error.empty() ? "no free file name in " + dir.string() : error;
    return;
  }
  // The description every client is sent first says where the run is recorded; it is the
  // recording's first message too (the publisher's later ones come through its tap).
  description_.recording = recorder_->path();
  recorder_->record(description_, std::make_shared<const std::vector<char>>(wire::encode(description_)));
}

void Probe::Impl::report_record_drops() {
  if (!recording_failure_.empty()) {
    add_event("record_dropped", "", "this run is not recorded: " + recording_failure_ +
                                        " (ProbeOptions::record_dir; \"\" turns recording off)");
    recording_failure_.clear();
    return;
  }
  if (!recorder_) return;
  const uint64_t dropped = recorder_->dropped();
  if (dropped == record_dropped_seen_) return;
  const auto now = Clock::now();
  if (last_record_dropped_event_ && now - *last_record_dropped_event_ < kRecordDroppedInterval) return;
  last_record_dropped_event_ = now;
  add_event("record_dropped", "",
            std::to_string(dropped - record_dropped_seen_) + " message(s) could not be written to " +
                recorder_->path() + " (" + std::to_string(dropped) + " so far): " + recorder_->failure() +
                "; training goes on, and the recording has a gap");
  record_dropped_seen_ = dropped;
}

}  // namespace keel::probe
