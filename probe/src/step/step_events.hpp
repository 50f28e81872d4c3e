// StepEvents: the events a run raises (wire::Event: a skip, a first non-finite gradient, a dump
// written, a failure of the probe's own), kept until they go out with a step's record.
// Owns: the events raised since the last record went out, and those that went out with it
// (Probe::last_events()); the count of the probe's own failures (every record's probe_errors);
// how many telemetry resets were told.
// Thread: the training thread only (attach, step, settle, the probe's end).
// Never: blocks, or syncs a device. Adding an event allocates: events are raised when
// something changes, not every step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "keel/wire/messages.hpp"
#include "transport/publisher.hpp"

namespace keel::probe {

class StepEvents {
 public:
  // Every event names the rank, the run and the model that raised it.
  StepEvents(int32_t rank, std::string run, std::string model);

  void add(int64_t step, const std::string& kind, const std::string& layer, const std::string& detail);
  // A failure inside the probe: counted (probe_errors()) and told as a "probe_error" event:
  // `what` failed with `error`, and `consequence` says what the step did.
  void add_probe_error(int64_t step, const std::string& what, const std::string& error, const std::string& consequence);
  // The event added last (not empty), to attach a cause to.
  wire::Event& last() { return events_.back(); }

  // At a step's start: the events that went out with the last record are dropped; those
  // that did not (raised after it, or with a record that failed to go out) go with this step's.
  void drop_published();
  // The events not yet published, handed to `publisher` (ahead of the record they go with);
  // still unpublished until mark_published(), once their record is out too.
  void publish_unpublished(Publisher& publisher) const;
  void mark_published() { published_ = events_.size(); }
  // The probe's end: the events of the last step are forgotten, so only what is raised after
  // this goes out in the last drain.
  void clear() {
    events_.clear();
    published_ = told_ = 0;
  }

  // The telemetry_reset event, once each time `publisher` (null: none) has closed every
  // telemetry connection since the last call (a client subscribing without bound).
  void tell_subscription_resets(const Publisher* publisher, int64_t step);

  // Each event added since the last call, handed to `tell` (ProbeOptions::on_event).
  template <typename Tell>
  void tell_untold(Tell&& tell) {
    for (; told_ < events_.size(); ++told_) tell(events_[told_]);
  }

  const std::vector<wire::Event>& all() const { return events_; }
  uint64_t probe_errors() const { return probe_errors_; }

 private:
  int32_t rank_;
  std::string run_, model_;
  std::vector<wire::Event> events_;
  size_t published_ = 0;   // events_[0, this) went out with a record already
  size_t told_ = 0;        // events_[0, this) were handed to tell_untold's callback
  uint64_t probe_errors_ = 0;
  uint64_t subscription_resets_seen_ = 0;
};

}  // namespace keel::probe
