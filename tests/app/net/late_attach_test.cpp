// Late attach through the dashboard's network thread over real loopback sockets: a fake probe
// (PUB on port P, command ROUTER on P + 1) answers the receiver's history request while live
// steps are already arriving; the model then holds every step once, in order, with no
// duplicate and no sequence gap. A probe that never answers costs the live view two seconds
// at most, and the endpoint state says why there was no backfill.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include <gtest/gtest.h>

#include "fake_command_server.hpp"
#include "test_publisher.hpp"
#include "model/model.hpp"
#include "net/receiver.hpp"

namespace keel::app {
namespace {

namespace wire = keel::wire;
using test_support::FakeCommandServer;
using test_support::TestPublisher;
using Clock = std::chrono::steady_clock;

using test_support::port_of;

wire::StepRecord step(int64_t index, uint64_t seq) {
  wire::StepRecord record = test_support::sample_step(index);
  record.seq = seq;
  return record;
}

// Sends the description until the receiver delivers it (PUB drops what it sends before the
// subscription reaches it).
void attach(TestPublisher& publisher, Receiver& receiver, Model& model, uint64_t seq) {
  wire::RunDescription description = test_support::sample_run();
  description.seq = seq;
  const auto give_up = Clock::now() + std::chrono::seconds(10);
  std::vector<wire::Message> got;
  while (got.empty() && Clock::now() < give_up) {
    publisher.send(description);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    receiver.drain(got);
  }
  ASSERT_FALSE(got.empty()) << "nothing from " << publisher.endpoint();
  for (const wire::Message& message : got) model.ingest(message);
}

void drain_into(Receiver& receiver, Model& model, int64_t until_step, double secs) {
  const auto give_up = Clock::now() + std::chrono::duration<double>(secs);
  std::vector<wire::Message> got;
  while (Clock::now() < give_up) {
    got.clear();
    receiver.drain(got);
    for (const wire::Message& message : got) model.ingest(message);
    const RunModel* run = model.current_run(0);
    if (run && run->has_steps() && run->last_step() >= until_step) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

TEST(LateAttach, HistoryAndLiveStreamMeetWithoutHoleOrDuplicate) {
  std::atomic<bool> release{false};
  FakeCommandServer::Handler handler = [&release](const wire::Command& c) -> std::vector<wire::Message> {
    if (c.kind != "history") return {};
    // Answers only once live steps overlapping the ring have reached the receiver.
    const auto give_up = Clock::now() + std::chrono::seconds(10);
    while (!release.load() && Clock::now() < give_up) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::vector<wire::Message> replies;
    for (int64_t s = 0; s <= 10; ++s) replies.push_back(step(s, uint64_t(s) + 1));
    wire::Ack ack = FakeCommandServer::ack_for(c, true, 10);
    ack.count = 11;
    replies.push_back(ack);
    return replies;
  };
  // A publisher whose port + 1 is free for the command socket.
  std::unique_ptr<TestPublisher> publisher;
  std::unique_ptr<FakeCommandServer> server;
  for (int attempt = 0; attempt < 50 && !server; ++attempt) {
    publisher = std::make_unique<TestPublisher>();
    try {
      server = std::make_unique<FakeCommandServer>(
          handler, "tcp://127.0.0.1:" + std::to_string(port_of(publisher->endpoint()) + 1));
    } catch (const zmq::error_t&) {
    }
  }
  ASSERT_TRUE(server) << "no free port pair";

  Receiver receiver({publisher->endpoint()});
  Model model;
  ASSERT_NO_FATAL_FAILURE(attach(*publisher, receiver, model, 1000));
  const auto give_up = Clock::now() + std::chrono::seconds(10);
  while (server->received().empty() && Clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(server->received().size(), 1u);
  EXPECT_EQ(server->received()[0].kind, "history");
  EXPECT_EQ(server->received()[0].count, 1 << 20);
  // The token the receiver's subscription announced, so a probe that is ending waits for it.
  EXPECT_EQ(server->received()[0].token.size(), 16u);

  for (int64_t s = 8; s <= 15; ++s) publisher->send(step(s, 1000 + uint64_t(s) - 7));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  drain_into(receiver, model, 0, 0);
  ASSERT_NE(model.current_run(0), nullptr);
  EXPECT_FALSE(model.current_run(0)->has_steps()) << "live steps must wait for the history";
  release.store(true);
  drain_into(receiver, model, 15, 10);

  const RunModel& run = *model.current_run(0);
  EXPECT_EQ(run.run_id(), "demo-run");
  EXPECT_EQ(run.first_step(), 0);
  EXPECT_EQ(run.last_step(), 15);
  EXPECT_EQ(run.counters().steps_stored, 16u);
  EXPECT_EQ(run.counters().duplicate_steps, 0u);
  EXPECT_EQ(run.counters().seq_gaps, 0u);
  const EndpointState state = receiver.endpoint_states().at(0);
  EXPECT_EQ(state.backfill, "backfilled 8 steps (0..7)");
  EXPECT_EQ(state.backfill_outcomes, 1u);

  publisher->send(step(16, 1009));
  drain_into(receiver, model, 16, 10);
  EXPECT_EQ(model.current_run(0)->last_step(), 16);
  EXPECT_EQ(server->received().size(), 1u) << "one history request per attach";
}

TEST(LateAttach, AProbeThatNeverAnswersCostsTheTimeoutAndSaysSo) {
  TestPublisher publisher;  // nothing answers on its port + 1
  ReceiverOptions options;
  options.backfill_options.timeout_secs = 0.3;
  Receiver receiver({publisher.endpoint()}, options);
  Model model;
  ASSERT_NO_FATAL_FAILURE(attach(publisher, receiver, model, 1));
  publisher.send(step(5, 2));
  drain_into(receiver, model, 5, 10);
  ASSERT_TRUE(model.current_run(0)->has_steps());
  EXPECT_EQ(model.current_run(0)->last_step(), 5);
  EXPECT_EQ(receiver.endpoint_states().at(0).backfill,
            "no backfill: no answer to the history request within 0.3 s");
}

TEST(LateAttach, AnEndpointWithoutACommandPortGoesLiveAtOnce) {
  // ipc endpoints have no port + 1 (PROTOCOL §1).
  const std::string endpoint = "ipc:///tmp/keel-late-attach-test-" + std::to_string(::getpid());
  zmq::context_t context{1};
  zmq::socket_t pub{context, zmq::socket_type::pub};
  pub.set(zmq::sockopt::linger, 0);
  pub.bind(endpoint);
  Receiver receiver({endpoint});
  const auto give_up = Clock::now() + std::chrono::seconds(10);
  std::vector<wire::Message> got;
  while (got.size() < 2 && Clock::now() < give_up) {
    const std::vector<char> payload = wire::encode(step(1, 1));
    pub.send(zmq::buffer(std::string("step")), zmq::send_flags::sndmore);
    pub.send(zmq::buffer(payload), zmq::send_flags::none);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    receiver.drain(got);
  }
  EXPECT_GE(got.size(), 2u);
  EXPECT_EQ(receiver.endpoint_states().at(0).backfill,
            "no backfill: the endpoint has no port + 1 for a command socket");
}

}  // namespace
}  // namespace keel::app
