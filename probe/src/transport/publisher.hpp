// Publisher: the probe's background thread that encodes and sends telemetry.
//
// What it is for: the training thread only copies a record into a bounded single-producer /
// single-consumer ring; this thread encodes it (shared/PROTOCOL.md), sends it on an XPUB
// socket, keeps rings of recent encoded step records and events for backfill, and (re)sends the run
// description to every new subscriber and periodically.
// Subscribers are untrusted: libzmq keeps every subscription in a trie that costs ~50 bytes per
// byte of topic, so one 10 MB topic cost the trainer 340 MB and ten thousand random ones 47 MB.
// A subscription longer than max_subscription_bytes drops that connection (ZMQ_MAXMSGSIZE);
// when the connections together hold more than max_subscriptions, every telemetry connection
// is closed (a fresh socket on the same address) and counted: clients reconnect within
// ZeroMQ's reconnect interval and see the records sent meanwhile as a seq gap.
// With keys (PublisherOptions::secret_key), the socket is a CURVE server: only an allowed client
// completes the handshake, so no one else reads the run or reaches the trie at all.
// A client's `backfill:<token>` subscription (PROTOCOL §2) is not a subscriber to describe to:
// it tells PublisherOptions::history_intents that a history request is on its way.
// Threads: publish() and describe() from the training thread only (single producer); the
// socket belongs to the publisher thread until finish(). Never: blocks the producer (a full
// ring drops the message and counts it; a subscriber whose pipe is full loses it alone and sees
// a seq gap); throws from publish(); waits on the network past finish()'s deadline (the
// destructor's: a short linger).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "curve_guard.hpp"
#include "history_intents.hpp"
#include "keel/wire/messages.hpp"
#include "kept_message.hpp"

namespace keel::probe {

struct PublisherOptions {
  // "" binds no socket: the thread still encodes every message for the tap (a run recorded
  // but not published).
  std::string endpoint;
  size_t queue_capacity = 256;
  int send_high_water_mark = 1000;
  std::chrono::milliseconds describe_interval{2000};
  size_t history_steps = 4096;
  // Recent events kept beside the steps (when history_steps > 0): a late client learns of the
  // first non-finite gradient, skips and dumps it did not see live.
  size_t history_events = 1024;
  // Largest subscription message (1 byte + topic); the protocol's topics are a few bytes. With
  // keys, at least 512: CURVE's handshake must pass the same limit.
  int64_t max_subscription_bytes = 64;
  // Subscriptions held by all connections together before they are all closed; a dashboard
  // or keel-cli holds one per probe.
  int64_t max_subscriptions = 1024;
  // Telemetry authentication (CURVE, PROTOCOL §6): the probe's Z85 secret key and the Z85
  // public keys of the clients allowed to subscribe; "" = anyone who reaches the port reads
  // the run. Refusals are reported like the command socket's (CurveGuard).
  std::string secret_key;
  std::vector<std::string> allowed_client_keys;
  std::chrono::milliseconds refusal_report_interval{60000};
  // Called on the publisher thread with every description, step record and event taken from
  // the queue, in order, and its payload as encoded (shared, immutable): the flight recorder.
  // Not called for the periodic re-sends of the description. Must not block.
  std::function<void(const wire::Message&, const std::shared_ptr<const std::vector<char>>&)> tap;
  // Told of every backfill:<token> subscription and of its connection closing; null: ignored.
  std::shared_ptr<HistoryIntents> history_intents;
};

class Publisher {
 public:
  // Binds the socket and starts the thread; throws AttachError when the bind fails.
  Publisher(PublisherOptions options, wire::RunDescription description);
  // finish() with a short linger, unless it was called.
  ~Publisher();
  Publisher(const Publisher&) = delete;
  Publisher& operator=(const Publisher&) = delete;

  // Queues a copy (or drops it when the ring is full). The publisher thread stamps its
  // sequence number when it sends it, so seq rises in send order across every topic.
  void publish(const wire::StepRecord& record);
  void publish(const wire::Event& event);
  // Replaces the run description (a new watched tensor, the model's new layers) and queues it
  // in order with the records: a subscriber reads it before any record published after this
  // call. Where the ring is full it is owed: the next publish() queues it first, and a record
  // that cannot follow it is dropped (counted) rather than sent under the old layers.
  void describe(const wire::RunDescription& description);

  // Messages lost before any subscriber could have them: refused by the full ring, or not
  // taken by the socket.
  uint64_t dropped() const {
    return ring_dropped_.load(std::memory_order_relaxed) + send_dropped_.load(std::memory_order_relaxed);
  }
  uint64_t sent() const { return sent_.load(std::memory_order_relaxed); }
  // Times every telemetry connection was closed because subscribers held too many subscriptions.
  uint64_t subscription_resets() const { return subscription_resets_.load(std::memory_order_relaxed); }
  // Subscribers refused by authentication since the last report, when one is due; false when
  // none is (always without authentication). Training thread.
  bool take_refusals(std::vector<AuthRefusal>& out);
  const std::string& bound_endpoint() const { return bound_endpoint_; }
  // When the socket was bound (construction, for a publisher without one).
  std::chrono::steady_clock::time_point bound_at() const { return bound_at_; }
  // Whether every message published so far has been handed to the socket (any thread).
  bool queue_empty() const {
    return tail_.load(std::memory_order_acquire) == head_.load(std::memory_order_acquire);
  }
  // Stops the thread after a last drain and closes the socket, which delivers what it queued
  // for connected subscribers until `deadline` at most, then drops the rest. Called once, by
  // the producer, after its last publish() (exit_flush.hpp).
  void finish(std::chrono::steady_clock::time_point deadline);
  // Encoded payloads of the most recent step records, oldest first (any thread), shared and
  // immutable (KeptMessage). The run descriptions sent in order with them (the layers changed,
  // PROTOCOL §3.2) are among them; where there is one, the first message is the description
  // the oldest record was published under, so every record can be read with its own layers.
  using Payload = std::shared_ptr<const std::vector<char>>;
  std::vector<KeptMessage> history() const;
  // Encoded payloads of the most recent events, oldest first (any thread).
  std::vector<Payload> event_history() const;

 private:
  // False when the ring was full (the message is dropped and counted).
  template <class T>
  bool enqueue(const T& message);
  // The same, without counting a refusal.
  template <class T>
  bool try_enqueue(const T& message);
  // Queues a record or event behind the owed description, if any; dropped (and counted) when
  // either does not fit.
  template <class T>
  void publish_in_order(const T& message);
  void run();
  // Creates, configures and binds the XPUB socket (throws zmq::error_t).
  void open_socket(const std::string& endpoint);
  // Reads subscription messages; true when one was a new subscription.
  bool take_subscriptions();
  // Replaces the socket by a fresh one on the same address, dropping every connection.
  void reset_connections();
  void drain();
  // Sends sent_description_ again (a new subscriber, the periodic re-send).
  void send_description();
  // The next sequence number, after those of records the ring refused (publisher thread).
  uint64_t take_seq();
  bool send(const char* topic, const std::vector<char>& payload);

  PublisherOptions options_;
  struct Socket;
  std::unique_ptr<Socket> socket_;
  std::string bound_endpoint_;
  std::chrono::steady_clock::time_point bound_at_;
  bool finished_ = false;   // producer only

  std::vector<wire::Message> ring_;
  std::atomic<uint64_t> head_{0};   // next slot the producer writes
  std::atomic<uint64_t> tail_{0};   // next slot the consumer reads
  std::atomic<uint64_t> ring_dropped_{0};   // written by the producer only
  std::atomic<uint64_t> send_dropped_{0};   // written by the publisher thread only
  // Publisher thread only: seq is assigned in send order (PROTOCOL §5).
  uint64_t next_seq_ = 0;
  uint64_t ring_drops_numbered_ = 0;
  std::atomic<uint64_t> sent_{0};
  std::atomic<uint64_t> subscription_resets_{0};
  // Publisher thread only: subscriptions held by the socket's connections, as far as libzmq
  // has told us (see take_subscriptions), and whether the socket is bound after a reset.
  int64_t live_subscriptions_ = 0;
  bool bound_ = false;

  // Training thread only: a description the full ring refused, queued before the next message.
  std::optional<wire::RunDescription> owed_description_;
  // Publisher thread only: the description the messages sent so far were published under,
  // which is what a re-send repeats (never one still waiting behind records in the ring).
  wire::RunDescription sent_description_;

  // Keeps a published step record or description for history() (publisher thread).
  void keep_in_history(const char* topic, Payload payload);

  mutable std::mutex history_mutex_;
  std::deque<KeptMessage> history_;   // steps, and the descriptions between them
  size_t history_steps_kept_ = 0;
  size_t history_descriptions_kept_ = 0;
  Payload layout_before_history_;   // the description in force at history_'s front
  std::deque<Payload> event_history_;

  std::vector<char> scratch_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace keel::probe
