// keel app Receiver: the dashboard's network thread (telemetry in, decoded messages out).
//
// What it is for: the UI must never touch a socket or wait on the network. A Receiver starts
// one background thread that owns one Subscriber per endpoint (so it can tell which endpoint
// is live, stale or speaks another protocol version), decodes, and pushes each message into a
// bounded queue that the UI thread drains once per frame. When an endpoint is first heard, the
// thread also asks its probe for the recent history and merges it in front of the live stream
// (late attach: backfill.hpp, late_attach.hpp), so the model gets every step once, in order.
// Threads: construct, drain(), endpoint_states() and the destructor from one owner thread
// (the UI thread); the background thread is private. drain() and endpoint_states() take a
// short lock and never wait on the network.
// Never: blocks the owner on a socket, throws after construction, or grows without bound: when
// the UI falls behind, the oldest queued messages are dropped and counted (queue_dropped()).
// Destruction stops the thread within one poll interval (sockets have linger 0).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "keel/wire/messages.hpp"
#include "net/backfill.hpp"
#include "net/client_auth.hpp"
#include "values/endpoint_state.hpp"

namespace keel::app {

struct ReceiverOptions {
  // A trainer step takes tens of milliseconds and the run description is re-sent every few
  // seconds, so several seconds of silence means the trainer is gone or stuck.
  double stale_after_secs = 3.0;
  // At ~20 steps/s a few seconds of frames where the UI stalls fit comfortably.
  size_t queue_capacity = 4096;
  // And at most this many bytes (message_bytes.hpp): a count alone bounds nothing when one
  // record may hold a 100,000-layer model. The oldest go first, counted as queue drops;
  // the newest message is always kept. keel sets it from its memory budget (an eighth).
  size_t queue_bytes = size_t{128} << 20;
  // Late attach (backfill.hpp): when an endpoint is first heard (or its trainer restarts), ask
  // the probe's command socket (port + 1) for its history ring and deliver it before the live
  // stream. A backfill is delivered whole even past queue_capacity: it is bounded by the ring.
  bool backfill = true;
  BackfillOptions backfill_options;
  // Keys presented to the probes' telemetry and command sockets (the user's own by default).
  ClientAuth auth;
  // Called on the receiver thread after it queued one or more messages, so the UI can wake
  // and draw them now rather than at its next idle frame. Must be cheap and thread-safe (keel
  // passes FramePacer::notify_data); empty: nobody is told.
  std::function<void()> on_data;
};

class Receiver {
 public:
  // Connects to every endpoint (ZeroMQ connects and reconnects in the background, so a trainer
  // may start later or restart). Throws std::invalid_argument for an endpoint ZeroMQ rejects.
  Receiver(const std::vector<std::string>& endpoints, ReceiverOptions options = {});
  Receiver(const Receiver&) = delete;
  Receiver& operator=(const Receiver&) = delete;
  ~Receiver();

  // Moves every queued message into `out` (appended), oldest first.
  void drain(std::vector<keel::wire::Message>& out);

  std::vector<EndpointState> endpoint_states() const;
  // Messages thrown away because the queue was full (the UI fell behind).
  uint64_t queue_dropped() const { return queue_dropped_.load(); }

 private:
  using Clock = std::chrono::steady_clock;
  struct Link {
    std::string endpoint;
    uint64_t messages = 0;
    uint64_t decode_errors = 0;
    std::string last_error;
    bool version_error_since_message = false;
    std::string refusal;
    Clock::time_point last_message{};
    std::string backfill;
    uint64_t backfill_outcomes = 0;
    int32_t rank = -1;
  };

  void run(std::vector<std::string> endpoints);
  void push(keel::wire::Message&& message);

  ReceiverOptions options_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> queue_dropped_{0};
  size_t queued_bytes_ = 0;        // message_bytes() of the queue
  size_t backfill_allowance_ = 0;  // queue room above capacity for backfills not drained yet
  mutable std::mutex mutex_;  // guards queue_ and links_
  std::deque<keel::wire::Message> queue_;
  std::vector<Link> links_;
  std::thread thread_;
};

}  // namespace keel::app
