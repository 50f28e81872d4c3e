// BackgroundPublisher: a TestPublisher publishing from its own thread, one cycle every 10 ms,
// until stopped.
//
// What it is for: a PUB socket drops what it sends before a subscriber's subscription reaches
// it, so a CLI test cannot send once and expect it to arrive: it publishes in a loop, as a
// probe does. It takes the user's own key by default, as a probe given no keys does.
// Threads: `cycle` runs on the publisher's thread, the only one that touches its socket.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "test_publisher.hpp"

namespace keel::app::test_support {

class BackgroundPublisher {
 public:
  explicit BackgroundPublisher(std::function<void(TestPublisher&, int)> cycle, ServerAuth auth = ServerAuth::kUsersOwnKey)
      : publisher_(auth), endpoint_(publisher_.endpoint()), thread_([this, cycle] {
          for (int i = 0; !stop_.load(); ++i) {
            cycle(publisher_, i);
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
          }
        }) {}
  ~BackgroundPublisher() { stop(); }

  const std::string& endpoint() const { return endpoint_; }
  void stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }

 private:
  TestPublisher publisher_;
  std::string endpoint_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace keel::app::test_support
