// keel app CommandSocket: a client's DEALER socket to one probe's command endpoint.
//
// What it is for: sending `cmd` messages (skip, dump, policy, describe, history) and reading
// what comes back: `ack` messages, and before a history ack the `step` records it covers
// (PROTOCOL §6). Used by the receiver thread (late-attach backfill), the dashboard's command
// thread (CommandClient) and keel-cli.
// Threads: one thread owns a CommandSocket and makes every call on it (ZeroMQ sockets are not
// thread-safe); it may be moved to another thread between calls, never shared.
// Never: waits in send() (connect() has made the pipe, so a command queues even before the
// probe is reachable), throws for bad bytes (receive() reports them as kDecodeError), or
// blocks in the destructor (linger 0: a client that gave up has nothing left to deliver).
// Only a command endpoint ZeroMQ cannot parse throws, from the constructor.
#pragma once

#include <string>

#include <zmq.hpp>

#include "keel/wire/messages.hpp"
#include "net/client_auth.hpp"
#include "net/handshake_watch.hpp"
#include "net/read_message.hpp"

namespace keel::app {

class CommandSocket {
 public:
  // Connects to `command_endpoint` ("tcp://127.0.0.1:5558"), as a CURVE client when `auth`
  // is enabled; throws std::invalid_argument naming it when ZeroMQ rejects it.
  explicit CommandSocket(const std::string& command_endpoint, const ClientAuth& auth = {});
  CommandSocket(const CommandSocket&) = delete;
  CommandSocket& operator=(const CommandSocket&) = delete;
  CommandSocket(CommandSocket&&) noexcept = default;
  // No move-assignment: replacing context_ before socket_ would block on the open socket.
  CommandSocket& operator=(CommandSocket&&) = delete;
  ~CommandSocket() = default;

  // Queues one command. Returns false, with the reason in `error`, when it cannot be queued.
  bool send(const keel::wire::Command& command, std::string& error);
  // Waits up to timeout_ms (0: just check) for one reply and decodes it; reads the handshake
  // events first.
  ReceiveResult receive(int timeout_ms) {
    read_handshake_events();
    return read_message(socket_, timeout_ms);
  }
  // Reads the handshake events waiting (never blocks); true when refusal() changed. Whoever
  // polls the socket without receive() calls it now and then.
  bool read_handshake_events() { return watch_.update(); }
  // Why the probe refuses this client's handshake, as of the last read; "" when it does not
  // (HandshakeWatch). A refused client's commands are never delivered.
  const std::string& refusal() const { return watch_.refusal(); }

  const std::string& endpoint() const { return endpoint_; }
  // For zmq::poll over several sockets by their owner thread.
  zmq::socket_t& socket() { return socket_; }

 private:
  // Declared first so it outlives the socket: a socket must close before its context.
  zmq::context_t context_;
  zmq::socket_t socket_;
  HandshakeWatch watch_;
  std::string endpoint_;
};

}  // namespace keel::app
