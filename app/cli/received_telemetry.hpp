// ReceivedTelemetry: the probes' telemetry as keel-cli's listening commands receive it (tail,
// watch).
//
// What it is for: both subscribe on the dashboard's own network thread (net/receiver.hpp: the
// history backfill, reconnects), present the same keys (--server-key, --key, --no-auth), wake
// as soon as messages are queued, and tell the user the same things of each link: a probe that
// refused this client's keys (why, and the way to reach it: PROTOCOL §6), an undecodable message
// dropped. Written once, so tail and watch say them alike.
// Threads: construct, receive() and destroy on one owner thread; the Receiver's thread is its own.
// Never: waits longer than asked; throws after construction.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "keel/wire/messages.hpp"
#include "net/client_auth.hpp"
#include "net/receiver.hpp"

namespace keel::app {

class ReceivedTelemetry {
 public:
  // One line to say, without its newline ("keel-cli: refused: ...").
  using Say = std::function<void(const std::string&)>;

  // Subscribes to every endpoint. Throws std::exception with a sentence: keys that cannot be
  // used, an endpoint ZeroMQ rejects.
  ReceivedTelemetry(const std::vector<std::string>& endpoints, const ClientAuthOptions& auth);
  ReceivedTelemetry(const ReceivedTelemetry&) = delete;
  ReceivedTelemetry& operator=(const ReceivedTelemetry&) = delete;

  // Waits at most `wait` (less as soon as messages are queued), appends what was received to
  // `inbox`, and says each refusal and undecodable message new since the last call. Returns
  // whether anything arrived: a message an endpoint counted (one not delivered yet, such as
  // a history reply being merged) or one delivered.
  bool receive(std::chrono::milliseconds wait, std::vector<wire::Message>& inbox, const Say& say);

  // Messages received from every endpoint so far, and of them the undecodable ones.
  uint64_t messages() const { return messages_; }
  uint64_t decode_errors() const { return decode_errors_; }
  // Each endpoint's refusal as last said ("": none).
  const std::vector<std::string>& refusals() const { return refusals_; }

 private:
  std::mutex wake_mutex_;
  std::condition_variable wake_;
  bool queued_ = false;   // the receiver queued messages since the last receive()
  std::unique_ptr<Receiver> receiver_;
  uint64_t messages_ = 0;
  uint64_t decode_errors_ = 0;
  std::vector<std::string> refusals_;
  std::vector<uint64_t> decode_errors_said_;   // per endpoint
};

}  // namespace keel::app
