#include "cli/received_telemetry.hpp"

namespace keel::app {

ReceivedTelemetry::ReceivedTelemetry(const std::vector<std::string>& endpoints, const ClientAuthOptions& auth)
    : refusals_(endpoints.size()), decode_errors_said_(endpoints.size(), 0) {
  ReceiverOptions options;
  options.auth = ClientAuth::from_options(auth);
  // The receiver thread wakes this one as soon as it has queued something.
  options.on_data = [this] {
    std::lock_guard<std::mutex> lock(wake_mutex_);
    queued_ = true;
    wake_.notify_one();
  };
  receiver_ = std::make_unique<Receiver>(endpoints, options);
}

bool ReceivedTelemetry::receive(std::chrono::milliseconds wait, std::vector<wire::Message>& inbox, const Say& say) {
  {
    std::unique_lock<std::mutex> lock(wake_mutex_);
    wake_.wait_for(lock, wait, [this] { return queued_; });
    queued_ = false;
  }
  const size_t before = inbox.size();
  receiver_->drain(inbox);
  uint64_t messages = 0;
  const std::vector<EndpointState> links = receiver_->endpoint_states();
  for (size_t i = 0; i < links.size() && i < refusals_.size(); ++i) {
    const EndpointState& link = links[i];
    messages += link.messages;
    if (link.refusal != refusals_[i]) {
      refusals_[i] = link.refusal;
      if (!link.refusal.empty()) say("keel-cli: refused: " + link.refusal);
    }
    for (; decode_errors_said_[i] < link.decode_errors; ++decode_errors_said_[i], ++decode_errors_) {
      say("keel-cli: warning: dropped an undecodable message: " + link.last_error);
    }
  }
  const bool arrived = messages != messages_ || inbox.size() != before;
  messages_ = messages;
  return arrived;
}

}  // namespace keel::app
