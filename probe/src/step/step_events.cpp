#include "step_events.hpp"

#include <utility>

#include "keel/wire/vocabulary.hpp"
#include "probe_clock.hpp"

namespace keel::probe {

StepEvents::StepEvents(int32_t rank, std::string run, std::string model)
    : rank_(rank), run_(std::move(run)), model_(std::move(model)) {}

void StepEvents::add(int64_t step, const std::string& kind, const std::string& layer, const std::string& detail) {
  wire::Event e;
  e.rank = rank_;
  e.run = run_;
  e.model = model_;
  e.step = step;
  e.kind = kind;
  e.layer = layer;
  e.detail = detail;
  e.stamp_unix_ns = unix_ns();
  events_.push_back(std::move(e));
}

void StepEvents::add_probe_error(int64_t step, const std::string& what, const std::string& error,
                                 const std::string& consequence) {
  ++probe_errors_;
  // Bounded: an exception's text can be anything (a CUDA message, a tensor's repr).
  constexpr size_t kMaxError = 400;
  const std::string shown = error.size() > kMaxError ? error.substr(0, kMaxError) + "..." : error;
  add(step, wire::event_kind::kProbeError, "", "keel failed " + what + ": " + shown + "; " + consequence);
}

void StepEvents::drop_published() {
  events_.erase(events_.begin(), events_.begin() + static_cast<std::ptrdiff_t>(published_));
  told_ = told_ > published_ ? told_ - published_ : 0;
  published_ = 0;
}

void StepEvents::publish_unpublished(Publisher& publisher) const {
  for (size_t e = published_; e < events_.size(); ++e) publisher.publish(events_[e]);
}

void StepEvents::tell_subscription_resets(const Publisher* publisher, int64_t step) {
  if (publisher == nullptr) return;
  const uint64_t resets = publisher->subscription_resets();
  if (resets == subscription_resets_seen_) return;
  subscription_resets_seen_ = resets;
  add(step, wire::event_kind::kTelemetryReset, "",
      "telemetry subscribers held more than " + std::to_string(PublisherOptions{}.max_subscriptions) +
          " subscriptions (a client subscribing without bound): every telemetry connection was closed (" +
          std::to_string(resets) + " time(s) so far); clients reconnect, and what was sent meanwhile shows as a gap");
}

}  // namespace keel::probe
