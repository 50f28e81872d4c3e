// RunRecording: the run's flight recording (record/flight_recorder.hpp) as the probe keeps it:
// where it goes, its start at attach, and what is told when it loses records.
// Owns: the FlightRecorder (and with it the thread that writes the file, fed by the
// publisher's tap), why the run is not recorded when record_dir asked for it, and how many of
// the recording's losses were told.
// Thread: the training thread (start() at attach, report_drops() as a step begins); dropped()
// and path() from any thread, as the recorder's own.
// Never: writes the file itself or waits for the disk (the recorder's thread does), or tells of
// a disk that keeps failing more than once a minute.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "keel/probe/probe_options.hpp"
#include "keel/wire/messages.hpp"
#include "probe_clock.hpp"
#include "record/flight_recorder.hpp"
#include "step_events.hpp"

namespace keel::probe {

class RunRecording {
 public:
  // Starts recording under options.record_dir (nothing when it is empty): `description` is
  // told where (its recording) and becomes the recording's first message. Why it cannot start
  // is kept for the first step's event.
  void start(const ProbeOptions& options, wire::RunDescription& description);
  // "record_dropped" events, of `step`: the recording could not start, or lost messages since
  // the last such event.
  void report_drops(StepEvents& events, int64_t step);

  // Null when the run is not recorded.
  FlightRecorder* recorder() const { return recorder_.get(); }
  std::string path() const { return recorder_ ? recorder_->path() : std::string(); }
  uint64_t dropped() const { return recorder_ ? recorder_->dropped() : 0; }

 private:
  std::unique_ptr<FlightRecorder> recorder_;
  // Why the run is not recorded, when record_dir asked for it: told once, at the first step.
  std::string failure_;
  uint64_t dropped_told_ = 0;
  std::optional<Clock::time_point> last_dropped_event_;
};

}  // namespace keel::probe
