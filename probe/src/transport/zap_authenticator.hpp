// ZapAuthenticator: decides which CURVE clients may talk to one of the probe's sockets.
//
// What it is for: with authentication on, the command and telemetry sockets are CURVE servers,
// and ZeroMQ asks this handler (ZAP, RFC 27, on inproc://zeromq.zap.01 of the socket's context)
// about every client handshake. A client whose public key is on the allowed list is accepted;
// any other is refused before a single command or subscription of it is read, and the refusal
// is remembered so the training thread can publish it as an event (CurveGuard).
// Threads: the thread that owns the guarded socket (it polls socket() beside it); the
// refusals reach the training thread through CurveGuard, under its mutex.
// Never: accepts a mechanism other than CURVE; keeps more than kMaxRefusalKinds distinct
// refusals (a flood of strangers is counted, not stored).
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <zmq.hpp>

namespace keel::probe {

struct AuthRefusal {
  std::string client_key;   // Z85 public key the client presented ("" if none)
  std::string address;      // peer IP address
  uint64_t attempts = 0;    // refused handshakes of this key and address since last taken
};

class ZapAuthenticator {
 public:
  static constexpr size_t kMaxRefusalKinds = 16;

  // Binds the ZAP endpoint in `context`; must exist before the CURVE socket binds.
  ZapAuthenticator(zmq::context_t& context, const std::vector<std::string>& allowed_keys);

  zmq::socket_t& socket() { return socket_; }
  // Answers every ZAP request waiting on the socket.
  void handle_requests();
  // A client that failed the handshake before authentication (no CURVE keys at all, or a
  // bad server key): ZeroMQ never asks us about it, its socket monitor tells.
  void note_failed_handshake() { remember_refusal("", "(handshake failed before authentication)"); }
  // Moves the refusals seen since the last call into `out`.
  void take_refusals(std::vector<AuthRefusal>& out);

 private:
  void answer(const std::vector<zmq::message_t>& request);
  void remember_refusal(const std::string& key, const std::string& address);

  zmq::socket_t socket_;
  std::set<std::string> allowed_;
  std::vector<AuthRefusal> refusals_;
  uint64_t refusals_dropped_ = 0;
};

}  // namespace keel::probe
