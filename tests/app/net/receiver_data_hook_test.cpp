// Receiver's on_data hook: it fires on the receiver thread once decoded messages are queued,
// so a UI woken by it finds them in drain() without polling.
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "test_publisher.hpp"
#include "net/receiver.hpp"

namespace keel::app {
namespace {

using test_support::sample_run;
using test_support::sample_step;
using test_support::TestPublisher;
using Clock = std::chrono::steady_clock;

TEST(ReceiverDataHook, FiresAfterMessagesAreQueued) {
  std::mutex mutex;
  std::condition_variable called;
  int calls = 0;
  ReceiverOptions options;
  options.on_data = [&] {
    std::lock_guard<std::mutex> lock(mutex);
    ++calls;
    called.notify_all();
  };
  TestPublisher publisher;
  Receiver receiver({publisher.endpoint()}, options);

  // PUB drops what it sends before the subscription is live: repeat until the hook fires.
  // The test never polls drain() before that, as a sleeping UI would not.
  const auto give_up = Clock::now() + std::chrono::seconds(10);
  bool fired = false;
  while (!fired && Clock::now() < give_up) {
    publisher.send(sample_run());
    std::unique_lock<std::mutex> lock(mutex);
    fired = called.wait_for(lock, std::chrono::milliseconds(50), [&] { return calls > 0; });
  }
  ASSERT_TRUE(fired) << "on_data never called";
  std::vector<wire::Message> got;
  receiver.drain(got);
  EXPECT_FALSE(got.empty()) << "woken before the message was queued";

  // And again for a later message, after the UI drained everything.
  int before = 0;
  {
    std::lock_guard<std::mutex> lock(mutex);
    before = calls;
  }
  publisher.send(sample_step(1));
  {
    std::unique_lock<std::mutex> lock(mutex);
    EXPECT_TRUE(called.wait_for(lock, std::chrono::seconds(5), [&] { return calls > before; }));
  }
  got.clear();
  receiver.drain(got);
  EXPECT_FALSE(got.empty());
}

}  // namespace
}  // namespace keel::app
