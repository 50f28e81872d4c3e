#include "net/subscriber.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include <gtest/gtest.h>
#include <zmq.hpp>

#include "keel/wire/curve_keys.hpp"
#include "test_publisher.hpp"

namespace keel::app {
namespace {

using test_support::sample_run;
using test_support::sample_step;
using test_support::TestPublisher;
namespace wire = keel::wire;

wire::Event marker(const std::string& kind) {
  wire::Event event;
  event.kind = kind;
  return event;
}

// PUB drops what it sends before the subscription reaches it. Send markers until one arrives,
// then a final one: everything after that final marker is received in order.
void wait_until_subscribed(TestPublisher& publisher, Subscriber& subscriber) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  bool joined = false;
  while (!joined && std::chrono::steady_clock::now() < give_up) {
    publisher.send(marker("sync"));
    joined = subscriber.receive(20).status == ReceiveStatus::kMessage;
  }
  ASSERT_TRUE(joined) << "no subscription from " << publisher.endpoint();
  publisher.send(marker("synced"));
  while (true) {
    ReceiveResult result = subscriber.receive(5000);
    ASSERT_EQ(result.status, ReceiveStatus::kMessage);
    if (std::get<wire::Event>(result.message).kind == "synced") return;
  }
}

std::string payload_of(const wire::Message& message) {
  const std::vector<char> bytes = wire::encode(message);
  return std::string(bytes.begin(), bytes.end());
}

TEST(Subscriber, ReceivesEachMessageWithItsTopic) {
  TestPublisher publisher;
  Subscriber subscriber({publisher.endpoint()});
  ASSERT_NO_FATAL_FAILURE(wait_until_subscribed(publisher, subscriber));

  wire::Ack ack;
  ack.id = 42;
  ack.ok = true;
  publisher.send(sample_run());
  publisher.send(sample_step(5));
  publisher.send(marker("first_nonfinite"));
  publisher.send(ack);

  ReceiveResult run = subscriber.receive(5000);
  ASSERT_EQ(run.status, ReceiveStatus::kMessage) << run.error;
  EXPECT_EQ(run.topic, "run");
  ASSERT_TRUE(std::holds_alternative<wire::RunDescription>(run.message));
  EXPECT_EQ(std::get<wire::RunDescription>(run.message).layers.size(), 2u);

  ReceiveResult step = subscriber.receive(5000);
  ASSERT_EQ(step.status, ReceiveStatus::kMessage) << step.error;
  EXPECT_EQ(step.topic, "step");
  EXPECT_EQ(std::get<wire::StepRecord>(step.message).step, 5);

  ReceiveResult event = subscriber.receive(5000);
  ASSERT_EQ(event.status, ReceiveStatus::kMessage) << event.error;
  EXPECT_EQ(event.topic, "event");
  EXPECT_EQ(std::get<wire::Event>(event.message).kind, "first_nonfinite");

  ReceiveResult acked = subscriber.receive(5000);
  ASSERT_EQ(acked.status, ReceiveStatus::kMessage) << acked.error;
  EXPECT_EQ(acked.topic, "ack");
  EXPECT_EQ(std::get<wire::Ack>(acked.message).id, 42u);
  EXPECT_EQ(subscriber.decode_errors(), 0u);
}

TEST(Subscriber, CountsMalformedMessagesAndKeepsReceiving) {
  TestPublisher publisher;
  Subscriber subscriber({publisher.endpoint()});
  ASSERT_NO_FATAL_FAILURE(wait_until_subscribed(publisher, subscriber));
  const uint64_t received_before = subscriber.messages_received();

  const std::string step_payload = payload_of(sample_step(9));
  publisher.send_frames({"step", std::string("\xc1\x00garbage", 9)});
  publisher.send_frames({"step", step_payload, "an extra frame"});
  publisher.send_frames({"step"});
  publisher.send_frames({"run", step_payload});
  publisher.send_frames({"step", step_payload});

  for (const char* expected : {"topic 'step'", "got 3", "got 1", "arrived on topic 'run'"}) {
    ReceiveResult bad = subscriber.receive(5000);
    ASSERT_EQ(bad.status, ReceiveStatus::kDecodeError) << expected;
    EXPECT_NE(bad.error.find(expected), std::string::npos) << bad.error;
  }
  EXPECT_EQ(subscriber.decode_errors(), 4u);

  ReceiveResult good = subscriber.receive(5000);
  ASSERT_EQ(good.status, ReceiveStatus::kMessage) << good.error;
  EXPECT_EQ(std::get<wire::StepRecord>(good.message).step, 9);
  EXPECT_EQ(subscriber.messages_received(), received_before + 1);
}

TEST(Subscriber, QuotesABinaryTopicPrintably) {
  TestPublisher publisher;
  Subscriber subscriber({publisher.endpoint()});
  ASSERT_NO_FATAL_FAILURE(wait_until_subscribed(publisher, subscriber));
  publisher.send_frames({std::string("\x1b[31m\x00", 6), "x"});
  ReceiveResult bad = subscriber.receive(5000);
  ASSERT_EQ(bad.status, ReceiveStatus::kDecodeError);
  EXPECT_EQ(bad.topic, "\\x1b[31m\\x00");
}

TEST(Subscriber, OneSocketReadsManyProbes) {
  TestPublisher rank0;
  TestPublisher rank1;
  Subscriber subscriber({rank0.endpoint()});
  subscriber.connect(rank1.endpoint());
  EXPECT_EQ(subscriber.endpoints().size(), 2u);
  ASSERT_NO_FATAL_FAILURE(wait_until_subscribed(rank0, subscriber));
  ASSERT_NO_FATAL_FAILURE(wait_until_subscribed(rank1, subscriber));

  rank0.send(sample_step(1, 0));
  rank1.send(sample_step(1, 1));
  int ranks_seen = 0;
  for (int i = 0; i < 2; ++i) {
    ReceiveResult result = subscriber.receive(5000);
    ASSERT_EQ(result.status, ReceiveStatus::kMessage) << result.error;
    ranks_seen |= 1 << std::get<wire::StepRecord>(result.message).rank;
  }
  EXPECT_EQ(ranks_seen, 0b11);
}

TEST(Subscriber, TimesOutWhenNothingArrives) {
  Subscriber subscriber({test_support::unused_endpoint()});
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(subscriber.receive(100).status, ReceiveStatus::kTimeout);
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, std::chrono::milliseconds(90));
  EXPECT_LT(waited, std::chrono::seconds(3));
  EXPECT_EQ(subscriber.receive(0).status, ReceiveStatus::kTimeout);
}

// Reads until refusal() holds `part` or timeout_ms pass; the refusal.
std::string refusal_within(Subscriber& subscriber, const std::string& part, int timeout_ms) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (subscriber.refusal().find(part) == std::string::npos && std::chrono::steady_clock::now() < give_up) {
    subscriber.receive(20);
  }
  return subscriber.refusal();
}

// The user's own keys against a probe that takes the user's own key: read as usual, no refusal.
TEST(Subscriber, TheUsersOwnKeyReadsAProbeThatTakesIt) {
  TestPublisher publisher(test_support::ServerAuth::kUsersOwnKey);
  Subscriber subscriber({publisher.endpoint()}, ClientAuth::from_options({}));
  ASSERT_NO_FATAL_FAILURE(wait_until_subscribed(publisher, subscriber));
  EXPECT_EQ(subscriber.refusal(), "");
}

// Each way a handshake fails is told in a sentence with the fix: keys against a probe that
// takes none, none against one that requires them, and the probe's key not the one expected
// (another user's run: their keel-cli takes their own key as the server's). The first and the
// last look alike from here (the probe closes the connection); a keyless check tells them apart.
TEST(Subscriber, ARefusedHandshakeIsToldWithTheFix) {
  TestPublisher open_probe(test_support::ServerAuth::kNone);
  Subscriber with_keys({open_probe.endpoint()}, ClientAuth::from_options({}));
  const std::string no_keys_taken = refusal_within(with_keys, "takes no keys (its probe", 5000);
  EXPECT_NE(no_keys_taken.find(open_probe.endpoint() + " takes no keys"), std::string::npos) << no_keys_taken;
  EXPECT_NE(no_keys_taken.find("--no-auth"), std::string::npos) << no_keys_taken;

  TestPublisher keyed_probe(test_support::ServerAuth::kUsersOwnKey);
  Subscriber without_keys({keyed_probe.endpoint()});
  const std::string keys_required = refusal_within(without_keys, "requires keys", 5000);
  EXPECT_NE(keys_required.find(keyed_probe.endpoint() + " requires keys"), std::string::npos) << keys_required;

  ClientAuth other_users;
  const keel::wire::CurveKeyPair other = keel::wire::generate_curve_key_pair();
  other_users.server_key = other.public_key;
  other_users.public_key = other.public_key;
  other_users.secret_key = other.secret_key;
  other_users.users_own = true;
  Subscriber stranger({keyed_probe.endpoint()}, other_users);
  const std::string not_expected = refusal_within(stranger, "did not accept", 5000);
  EXPECT_NE(not_expected.find("did not accept the handshake"), std::string::npos) << not_expected;
  EXPECT_NE(not_expected.find("another user's"), std::string::npos) << not_expected;
  // Its keyless check finds a probe that requires keys: the sentence drops the other cause.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (stranger.refusal().find("takes no keys") != std::string::npos && std::chrono::steady_clock::now() < give_up) {
    stranger.receive(20);
  }
  EXPECT_EQ(stranger.refusal().find("takes no keys"), std::string::npos) << stranger.refusal();
  EXPECT_NE(stranger.refusal().find("another user's"), std::string::npos) << stranger.refusal();
  EXPECT_EQ(stranger.receive(200).status, ReceiveStatus::kTimeout) << "a refused client received a message";
}

// A client that will ask for the history says so in a subscription of its own, which matches
// no topic (PROTOCOL §2): the probe sees it beside the one to every topic.
TEST(Subscriber, AClientThatWillAskForTheHistoryAnnouncesItsToken) {
  zmq::context_t context{1};
  zmq::socket_t xpub{context, zmq::socket_type::xpub};
  xpub.set(zmq::sockopt::linger, 0);
  xpub.bind("tcp://127.0.0.1:*");
  Subscriber subscriber({xpub.get(zmq::sockopt::last_endpoint)}, {}, "0123abcd");
  std::vector<std::string> subscriptions;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  zmq::message_t message;
  while (subscriptions.size() < 2 && std::chrono::steady_clock::now() < give_up) {
    zmq::pollitem_t item{static_cast<void*>(xpub), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds(50));
    while (xpub.recv(message, zmq::recv_flags::dontwait)) subscriptions.push_back(message.to_string());
  }
  std::sort(subscriptions.begin(), subscriptions.end());
  EXPECT_EQ(subscriptions, (std::vector<std::string>{std::string(1, '\1'), std::string("\1backfill:0123abcd")}));
}

TEST(Subscriber, RejectsAnInvalidEndpointByName) {
  try {
    Subscriber subscriber({"127.0.0.1:5557"});
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("'127.0.0.1:5557'"), std::string::npos);
  }
}

}  // namespace
}  // namespace keel::app
