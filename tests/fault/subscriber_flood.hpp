// SubscriberFlood: hostile telemetry subscribers against a probe's PUB endpoint.
//
// What it is for: the fault tests need subscribers that a real dashboard might turn into:
// many connecting and disconnecting in quick succession (each new subscription makes the
// probe re-send its run description), and one that connects and never reads (a frozen or
// wedged client whose socket buffers fill up), and hostile ones whose subscriptions would cost
// the trainer memory: huge topics, and thousands of distinct ones.
// Threads: start() and stop() from the owner thread; the churn runs on a private thread.
// Never: reads from the stalled subscriber; the destructor stops everything.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace keel::fault {

struct SubscriberFloodOptions {
  // libzmq subscribers, presenting the user's own key as keel-cli does:
  bool churn = true;              // subscribers connecting, reading briefly, disconnecting
  bool stalled = true;            // one subscriber that never reads
  // The stalled subscriber's kernel receive buffer: small, so its pipe in the probe fills
  // after hundreds of messages rather than after megabytes.
  int stalled_rcvbuf_bytes = 4096;
  // Raw ZMTP clients (zmtp_subscriber.hpp) that each subscribe to one topic of
  // huge_topic_bytes bytes, and one with random_subscriptions distinct random topics (up to
  // 100 bytes each). Each connects again and resubscribes whenever the probe closes it.
  int huge_topic_subscribers = 0;
  size_t huge_topic_bytes = 10 * 1024 * 1024;
  int random_subscriptions = 0;
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
  void subscribe_again_and_again(const std::vector<std::string>& topics);

  std::string endpoint_;
  SubscriberFloodOptions options_;
  struct Sockets;
  std::unique_ptr<Sockets> sockets_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> subscriptions_{0};
  std::thread thread_;
  std::vector<std::thread> hostile_;
};

}  // namespace keel::fault
