// The dashboard's network thread over real loopback sockets: messages reach the UI side in
// order, per-endpoint state goes connecting -> live -> stale, another protocol version is named
// as such, garbage is counted and survived, and a slow UI loses the oldest messages, counted.
#include "net/receiver.hpp"

#include <chrono>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include <gtest/gtest.h>

#include "test_publisher.hpp"

namespace keel::app {
namespace {

using test_support::sample_run;
using test_support::sample_step;
using test_support::TestPublisher;
namespace wire = keel::wire;
using Clock = std::chrono::steady_clock;

bool is_sentinel(const wire::Message& message) {
  const auto* run = std::get_if<wire::RunDescription>(&message);
  return run != nullptr && run->run_id == "sentinel";
}

// PUB drops what it sends before the subscription reaches it: repeat until the receiver has
// seen something, then send a sentinel and drain up to it, so tests start from an empty queue
// however long the repeats were in flight (a fixed settle time was not enough under TSan).
void wait_until_subscribed(TestPublisher& publisher, Receiver& receiver) {
  const auto give_up = Clock::now() + std::chrono::seconds(10);
  std::vector<wire::Message> got;
  while (got.empty() && Clock::now() < give_up) {
    publisher.send(sample_run());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    receiver.drain(got);
  }
  ASSERT_FALSE(got.empty()) << "nothing from " << publisher.endpoint();
  wire::RunDescription sentinel = sample_run();
  sentinel.run_id = "sentinel";
  publisher.send(sentinel);
  const auto sentinel_give_up = Clock::now() + std::chrono::seconds(10);
  bool seen = false;
  while (!seen && Clock::now() < sentinel_give_up) {
    got.clear();
    receiver.drain(got);
    for (const wire::Message& message : got) seen = seen || is_sentinel(message);
    if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(seen) << "the sentinel never arrived from " << publisher.endpoint();
}

std::vector<wire::Message> drain_until(Receiver& receiver, size_t count) {
  std::vector<wire::Message> got;
  const auto give_up = Clock::now() + std::chrono::seconds(10);
  while (got.size() < count && Clock::now() < give_up) {
    receiver.drain(got);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return got;
}

// These tests are about the live stream alone; late attach has its own (late_attach_test.cpp).
ReceiverOptions live_only() {
  ReceiverOptions options;
  options.backfill = false;
  return options;
}

// Re-encodes a payload with another protocol version: the first "v" key's fixint value.
std::string with_version(const wire::Message& message, uint8_t version) {
  std::vector<char> bytes = wire::encode(message);
  const std::string key = "\xa1v";
  std::string text(bytes.begin(), bytes.end());
  const size_t at = text.find(key);
  EXPECT_NE(at, std::string::npos);
  text[at + key.size()] = static_cast<char>(version);
  return text;
}

TEST(Receiver, DeliversDecodedMessagesInOrderAndGoesLive) {
  TestPublisher publisher;
  Receiver receiver({publisher.endpoint()}, live_only());
  EXPECT_EQ(receiver.endpoint_states().at(0).state, LinkState::kConnecting);
  ASSERT_NO_FATAL_FAILURE(wait_until_subscribed(publisher, receiver));

  for (int64_t step = 1; step <= 50; ++step) publisher.send(sample_step(step));
  const std::vector<wire::Message> got = drain_until(receiver, 50);
  ASSERT_EQ(got.size(), 50u);
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(std::holds_alternative<wire::StepRecord>(got[i]));
    EXPECT_EQ(std::get<wire::StepRecord>(got[i]).step, int64_t(i) + 1);
  }
  const EndpointState state = receiver.endpoint_states().at(0);
  EXPECT_EQ(state.state, LinkState::kLive);
  EXPECT_EQ(state.endpoint, publisher.endpoint());
  EXPECT_EQ(receiver.queue_dropped(), 0u);
}

TEST(Receiver, GoesStaleWhenTheTrainerFallsSilent) {
  TestPublisher publisher;
  ReceiverOptions options = live_only();
  options.stale_after_secs = 0.2;
  Receiver receiver({publisher.endpoint()}, options);
  ASSERT_NO_FATAL_FAILURE(wait_until_subscribed(publisher, receiver));
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_EQ(receiver.endpoint_states().at(0).state, LinkState::kStale);
  publisher.send(sample_step(1));
  drain_until(receiver, 1);
  EXPECT_EQ(receiver.endpoint_states().at(0).state, LinkState::kLive);
}

TEST(Receiver, NamesAProtocolMismatchAndSurvivesGarbage) {
  TestPublisher publisher;
  TestPublisher healthy;
  Receiver receiver({publisher.endpoint(), healthy.endpoint()}, live_only());
  ASSERT_NO_FATAL_FAILURE(wait_until_subscribed(healthy, receiver));
  // Subscriptions are per connection; give the first one time too.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto give_up = Clock::now() + std::chrono::seconds(10);
  while (receiver.endpoint_states().at(0).decode_errors == 0 && Clock::now() < give_up) {
    publisher.send_frames({"step", with_version(sample_step(1), 7)});
    publisher.send_frames({"step", "\xc1 not msgpack"});
    publisher.send_frames({"only one frame"});
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  publisher.send_frames({"step", with_version(sample_step(2), 7)});
  // The last frame sent is the version-7 one: wait until the receiver has read it.
  const auto mismatch_give_up = Clock::now() + std::chrono::seconds(10);
  while (receiver.endpoint_states().at(0).last_error.find("protocol version 7") == std::string::npos &&
         Clock::now() < mismatch_give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const std::vector<EndpointState> states = receiver.endpoint_states();
  EXPECT_GT(states[0].decode_errors, 0u);
  EXPECT_EQ(states[0].state, LinkState::kProtocolMismatch) << states[0].last_error;
  EXPECT_NE(states[0].last_error.find("protocol version 7"), std::string::npos);
  // The other endpoint, and the receiver as a whole, carry on.
  healthy.send(sample_step(3));
  const std::vector<wire::Message> got = drain_until(receiver, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(std::get<wire::StepRecord>(got[0]).step, 3);
  EXPECT_EQ(receiver.endpoint_states().at(1).state, LinkState::kLive);
}

TEST(Receiver, DropsTheOldestWhenTheUiFallsBehind) {
  TestPublisher publisher;
  ReceiverOptions options = live_only();
  options.queue_capacity = 10;
  Receiver receiver({publisher.endpoint()}, options);
  ASSERT_NO_FATAL_FAILURE(wait_until_subscribed(publisher, receiver));
  const uint64_t before = receiver.endpoint_states().at(0).messages;
  for (int64_t step = 1; step <= 30; ++step) publisher.send(sample_step(step));
  const auto give_up = Clock::now() + std::chrono::seconds(10);
  while (receiver.endpoint_states().at(0).messages < before + 30 && Clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::vector<wire::Message> got;
  receiver.drain(got);
  ASSERT_EQ(got.size(), 10u);
  EXPECT_EQ(std::get<wire::StepRecord>(got.front()).step, 21);
  EXPECT_EQ(std::get<wire::StepRecord>(got.back()).step, 30);
  EXPECT_EQ(receiver.queue_dropped(), 20u);
}

// A count bounds nothing when one record holds 100,000 layers: the queue is bounded by bytes
// too (message_bytes), the oldest going first, the newest always kept.
TEST(Receiver, BoundsItsQueueByBytesToo) {
  TestPublisher publisher;
  ReceiverOptions options = live_only();
  options.queue_bytes = size_t{8} << 20;
  Receiver receiver({publisher.endpoint()}, options);
  ASSERT_NO_FATAL_FAILURE(wait_until_subscribed(publisher, receiver));
  const uint64_t before = receiver.endpoint_states().at(0).messages;
  wire::StepRecord wide = sample_step(1);
  wide.layer_count = 100000;
  wide.layer_values.assign(size_t{100000} * wire::kLayerMetricCount, 1.0f);   // 2.4 MB
  for (int64_t step = 1; step <= 10; ++step) {
    wide.step = step;
    publisher.send(wide);
  }
  const auto give_up = Clock::now() + std::chrono::seconds(20);
  while (receiver.endpoint_states().at(0).messages < before + 10 && Clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::vector<wire::Message> got;
  receiver.drain(got);
  ASSERT_EQ(got.size(), 3u);   // 3 x 2.4 MB fit in 8 MB, a fourth does not
  EXPECT_EQ(std::get<wire::StepRecord>(got.back()).step, 10);
  EXPECT_EQ(receiver.queue_dropped(), 7u);
}

TEST(Receiver, RejectsAnEndpointZeroMqCannotParse) {
  EXPECT_THROW(Receiver({"not-an-endpoint"}), std::invalid_argument);
}

}  // namespace
}  // namespace keel::app
