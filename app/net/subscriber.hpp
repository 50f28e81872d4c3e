// keel app Subscriber: the telemetry side of a client (one SUB socket, one or many probes).
//
// What it is for: receiving run descriptions, step records, events and acks published by one
// or more probes (one per rank), decoded into keel::wire::Message values. ZeroMQ lets one SUB
// connect to many PUB/XPUB sockets, so a multi-rank run is one Subscriber with N endpoints.
// Threads: one thread owns a Subscriber and makes every call on it (ZeroMQ sockets are not
// thread-safe). It may be moved to another thread between calls, never shared.
// Never: throws for bad bytes. A payload that does not decode, a message that is not exactly
// two frames (topic, payload), or a payload whose type disagrees with its topic is counted in
// decode_errors() and returned as ReceiveStatus::kDecodeError with the reason. Only setup
// errors (an endpoint ZeroMQ cannot parse) throw, from the constructor or connect().
// Reading and checking a message is read_message() (read_message.hpp).
// Keys: a probe's telemetry takes only its owner's key by default (PROTOCOL §6); the
// Subscriber presents `auth` (the user's own by default, ClientAuth::from_options) and says
// in refusal() why a probe refused it (HandshakeWatch).
// Blocking: receive() blocks at most timeout_ms. Destruction never blocks (linger 0: a client
// that stops listening has nothing left to flush).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "keel/wire/messages.hpp"
#include "net/client_auth.hpp"
#include "net/handshake_watch.hpp"
#include "net/read_message.hpp"

namespace keel::app {

class Subscriber {
 public:
  // Connects to every endpoint ("tcp://127.0.0.1:5557", ...) and subscribes to all topics.
  // Connecting does not wait for a probe to exist: ZeroMQ connects (and reconnects) in the
  // background, so a client may start before the trainer; it retries every kReconnectMs, so
  // it is there within a few tens of milliseconds of the probe binding. Throws
  // std::invalid_argument naming the endpoint when ZeroMQ rejects it.
  // `auth`: the keys to present; disabled (the default here): none, for a probe that takes no
  // keys. `history_token`: not "" when this client will ask the probe for its history with it
  // (LateAttach::history_token()): it also subscribes to backfill:<token>, so a probe that is
  // ending waits for the request (PROTOCOL §2).
  explicit Subscriber(const std::vector<std::string>& endpoints, const ClientAuth& auth = {},
                      const std::string& history_token = "");

  // ZeroMQ's default is 100 ms plus up to as much again at random: a run shorter than that was
  // over before a client waiting for it had connected. A refused connection to a loopback
  // port costs a few microseconds.
  static constexpr int kReconnectMs = 20;

  Subscriber(const Subscriber&) = delete;
  Subscriber& operator=(const Subscriber&) = delete;
  Subscriber(Subscriber&&) noexcept = default;
  // No move-assignment: replacing context_ before socket_ would terminate a context whose
  // socket is still open, which blocks forever.
  Subscriber& operator=(Subscriber&&) = delete;
  ~Subscriber() = default;

  // Adds one more probe (e.g. another rank) to the same socket. Throws like the constructor.
  void connect(const std::string& endpoint);

  // Waits up to timeout_ms (0: just check) for one message and decodes it.
  ReceiveResult receive(int timeout_ms);

  const std::vector<std::string>& endpoints() const { return endpoints_; }
  uint64_t messages_received() const { return messages_received_; }
  uint64_t decode_errors() const { return decode_errors_; }
  // Why a probe refused this client's handshake, as of the last receive(); "" when none has
  // since the last one that succeeded.
  const std::string& refusal() const { return watch_.refusal(); }

 private:
  // Declared first so it outlives the socket: a socket must close before its context.
  zmq::context_t context_;
  zmq::socket_t socket_;
  HandshakeWatch watch_;
  std::vector<std::string> endpoints_;
  uint64_t messages_received_ = 0;
  uint64_t decode_errors_ = 0;
};

}  // namespace keel::app
