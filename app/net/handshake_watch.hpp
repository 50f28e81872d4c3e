// HandshakeWatch: why a probe refused this client, in a sentence the user can act on.
//
// What it is for: a probe's telemetry and command sockets take only its owner's key by default
// (PROTOCOL §6). ZeroMQ retries a refused connection forever and delivers nothing, so without
// this a client of another user's run, or of a probe that takes no keys, would just wait. The
// watch reads the socket's monitor and keeps the latest refusal as a sentence that says what
// happened and the fix; a successful handshake clears it.
// One failure is ambiguous from this side: a probe that closes the connection without a word
// either could not open our greeting (sealed for another key: another user's run) or saw keys
// and takes none (whichever side notices the mechanism mismatch first closes). The watch then
// connects once more without keys, on a socket of its own (of the same type), and that
// handshake's outcome tells which: it succeeds only where the probe takes no keys.
// Threads: the thread that owns the watched socket. Never: throws after construction (a
// monitor that cannot be made leaves the watch silent), blocks, keeps more than one check
// open.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include <zmq.hpp>

#include "net/client_auth.hpp"

namespace keel::app {

// Why a probe closed a keyed handshake, once a keyless one has told.
enum class KeyCause { kUnknown, kWrongKey, kTakesNoKeys };

// The sentence for one failed handshake on `endpoint` (a ZMQ_EVENT_HANDSHAKE_FAILED_* event
// and its value), given the keys this client presented and, for a closed connection, its cause.
std::string describe_handshake_failure(uint16_t event, uint32_t value, const std::string& endpoint,
                                       const ClientAuth& auth, KeyCause cause = KeyCause::kUnknown);

class HandshakeWatch {
 public:
  // Starts monitoring `socket` (before it connects); `context` is the socket's.
  HandshakeWatch(zmq::context_t& context, zmq::socket_t& socket, ClientAuth auth);
  HandshakeWatch(HandshakeWatch&&) noexcept;
  HandshakeWatch& operator=(HandshakeWatch&&) = delete;
  ~HandshakeWatch();

  // Reads the events waiting on the monitors; true when refusal() changed.
  bool update();
  // Why the latest handshake failed, "" when none has failed since the last success.
  const std::string& refusal() const { return refusal_; }

 private:
  struct KeyCheck;
  // Connects without keys to `endpoint`, unless a check is open already.
  void start_key_check(const std::string& endpoint);
  // Takes the open check's verdict, if it has one: the endpoint it settled, else "".
  std::string take_key_check();
  bool set_refusal(std::string sentence);

  ClientAuth auth_;
  int socket_type_ = ZMQ_SUB;   // the watched socket's, for the check
  std::unique_ptr<zmq::socket_t> monitor_;
  std::string refusal_;
  std::string refused_endpoint_;   // the endpoint refusal_ is about
  // Per endpoint: the cause of its last closed handshake, as far as a check has told.
  std::map<std::string, KeyCause> causes_;
  std::unique_ptr<KeyCheck> check_;
};

}  // namespace keel::app
