// read_message: one decoded keel message from any ZeroMQ socket of a client (SUB or DEALER).
//
// What it is for: the telemetry socket (Subscriber) and the command socket (CommandSocket)
// receive the same two-frame messages (topic, payload; PROTOCOL §2) and must reject the same
// bad input the same way, so the reading and checking live here once.
// Threads: whichever thread owns the socket.
// Never: throws for bad bytes: a payload that does not decode, a message that is not exactly
// two frames, or a payload whose type disagrees with its topic comes back as kDecodeError with
// the reason. Blocks at most timeout_ms.
#pragma once

#include <string>

#include <zmq.hpp>

#include "keel/wire/messages.hpp"

namespace keel::app {

enum class ReceiveStatus {
  kMessage,      // `message` and `topic` hold one decoded message
  kTimeout,      // nothing arrived within timeout_ms
  kDecodeError,  // something arrived but was dropped; `error` says why, `topic` what it claimed
  kInterrupted,  // a signal interrupted the wait (e.g. SIGINT); the caller decides what it means
};

struct ReceiveResult {
  ReceiveStatus status = ReceiveStatus::kTimeout;
  keel::wire::Message message;
  std::string topic;
  std::string error;
};

// Waits up to timeout_ms (0: just check) for one message on `socket` and decodes it.
ReceiveResult read_message(zmq::socket_t& socket, int timeout_ms);

}  // namespace keel::app
