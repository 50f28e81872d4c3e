// CurveGuard: CURVE authentication of one server socket, and who it refused.
//
// What it is for: the command socket and the telemetry socket take only the clients whose
// keys are allowed (PROTOCOL §6). A guard binds the ZAP handler (ZapAuthenticator) in the
// socket's context, makes the socket a CURVE server with the probe's secret key, and watches it
// with a monitor: a client that fails before ZAP is consulted (no keys at all, or another
// user's key taken as the server's) is a refusal too. The refusals are folded into reports for
// the training thread, which publishes them as auth_refused events: the first at once, then at
// most one per interval with the attempts in between, so a client that keeps reconnecting (every
// 100 ms) cannot push the run's own events out of the probe's ring.
// Threads: guard(), unguard(), poll_items() and service() on the thread that owns the socket;
// take_refusals() on the training thread (under a mutex held for a few instructions).
// Never: blocks; keeps more than ZapAuthenticator::kMaxRefusalKinds distinct refusals.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "zap_authenticator.hpp"

namespace keel::probe {

class CurveGuard {
 public:
  // Binds the ZAP handler in `context` (one guard per context). Throws zmq::error_t.
  CurveGuard(zmq::context_t& context, std::string secret_key, const std::vector<std::string>& allowed_keys,
             std::chrono::milliseconds report_interval);

  // Before `socket` binds: it becomes a CURVE server and is monitored. A socket replaced by a
  // fresh one is guarded again after unguard() of the old one.
  void guard(zmq::socket_t& socket);
  // Before `socket` closes: stops its monitor.
  void unguard(zmq::socket_t& socket);
  // Writes the sockets to poll beside the guarded one (at most 2) and returns how many.
  size_t poll_items(zmq::pollitem_t* items);
  // Answers waiting ZAP requests and notes the monitor's failed handshakes.
  void service();
  // Refusals since the last report, when one is due; false when none is.
  bool take_refusals(std::vector<AuthRefusal>& out);

 private:
  zmq::context_t& context_;
  std::string secret_key_;
  ZapAuthenticator zap_;
  std::unique_ptr<zmq::socket_t> monitor_;
  uint64_t monitors_made_ = 0;   // each monitor gets an inproc address of its own
  std::chrono::milliseconds report_interval_;

  std::mutex mutex_;                     // guards refusals_
  std::vector<AuthRefusal> refusals_;    // bounded like the authenticator's
  std::atomic<bool> has_refusals_{false};
  std::optional<std::chrono::steady_clock::time_point> last_report_;   // training thread
};

}  // namespace keel::probe
