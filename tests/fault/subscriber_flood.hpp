// SubscriberFlood: hostile telemetry subscribers against a probe's PUB endpoint.
//
// What it is for: the fault tests need subscribers that a real dashboard might turn into:
// many connecting and disconnecting in quick succession (each new subscription makes the
// probe re-send its run description), and one that connects and never reads (a frozen or
// wedged client whose socket buffers fill up).
// Threads: start() and stop() from the owner thread; the churn runs on a private thread.
// Never: reads from the stalled subscriber; the destructor stops everything.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

namespace keel::fault {

struct SubscriberFloodOptions {
  bool churn = true;              // subscribers connecting, reading briefly, disconnecting
  bool stalled = true;            // one subscriber that never reads
  // The stalled subscriber's kernel receive buffer: small, so its pipe in the probe fills
  // after hundreds of messages rather than after megabytes.
  int stalled_rcvbuf_bytes = 4096;
};

class SubscriberFlood {
 public:
  SubscriberFlood(std::string pub_endpoint, SubscriberFloodOptions options);
  ~SubscriberFlood();
  SubscriberFlood(const SubscriberFlood&) = delete;
  SubscriberFlood& operator=(const SubscriberFlood&) = delete;

  void start();
  void stop();
  uint64_t subscriptions() const { return subscriptions_.load(); }

 private:
  void churn();

  std::string endpoint_;
  SubscriberFloodOptions options_;
  struct Sockets;
  std::unique_ptr<Sockets> sockets_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> subscriptions_{0};
  std::thread thread_;
};

}  // namespace keel::fault
