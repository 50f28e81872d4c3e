// ZmtpSubscriber: a hostile telemetry client that speaks ZMTP 3.0 over a plain TCP socket.
//
// What it is for: sending subscriptions that a libzmq SUB socket cannot send safely itself.
// libzmq keeps its own copy of every subscription in a trie, one node per byte, and frees it
// recursively: a SUB socket holding a 10 MB topic overflows its reaper thread's stack when it
// closes. Speaking the protocol by hand keeps no copy, so the fault test can send what an
// attacker (or a buggy client in another language) would, as often as it likes.
// Threads: one object per thread. Never: reads what the probe publishes (a subscriber that
// never reads is part of the attack); blocks longer than its send timeout.
#pragma once

#include <string>
#include <vector>

namespace keel::fault {

class ZmtpSubscriber {
 public:
  ZmtpSubscriber() = default;
  ~ZmtpSubscriber();
  ZmtpSubscriber(const ZmtpSubscriber&) = delete;
  ZmtpSubscriber& operator=(const ZmtpSubscriber&) = delete;

  // Connects to "tcp://host:port" and completes the NULL handshake as a SUB peer; false when
  // the probe is not reachable.
  bool connect(const std::string& endpoint);
  // Sends one subscription message per topic; false once the probe has closed the connection.
  bool subscribe(const std::vector<std::string>& topics);
  // Whether the probe still holds the connection open (waits up to wait_ms for it to close).
  bool open(int wait_ms);
  void close();

 private:
  bool send_all(const std::string& bytes);
  int fd_ = -1;
};

}  // namespace keel::fault
