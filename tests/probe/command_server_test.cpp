// The command thread on its own (issue 12, item 8): a history answer to a client that reads
// slowly, or not at all, goes out as that client takes it, while every other client's commands
// are taken and acknowledged. It used to be sent on the command thread with a 1 s wait per
// message, so a slow reader held everyone's skip and dump acknowledgements.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "transport/command_server.hpp"
#include "keel/wire/curve_keys.hpp"
#include "keel/wire/codec.hpp"

namespace {

using keel::probe::CommandServer;
using keel::probe::CommandServerOptions;
using keel::probe::KeptMessage;

// Records of 256 KB each: the answer is far more than the kernel's socket buffers hold, so a
// client that does not read really stalls it.
std::vector<KeptMessage> ring_of(int steps) {
  std::vector<KeptMessage> ring;
  for (int i = 0; i < steps; ++i) {
    keel::wire::StepRecord record;
    record.step = i;
    record.metric_mask = 1;
    record.layer_count = 64 * 1024;
    record.layer_values.assign(record.layer_count, 0.5f);
    ring.emplace_back(keel::wire::kTopicStep, std::make_shared<const std::vector<char>>(keel::wire::encode(record)));
  }
  return ring;
}

class SmallBufferClient {
 public:
  SmallBufferClient(const std::string& endpoint, int receive_high_water_mark) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.set(zmq::sockopt::rcvhwm, receive_high_water_mark);
    socket_.set(zmq::sockopt::rcvbuf, 4096);
    socket_.connect(endpoint);
  }
  void send(uint64_t id, const std::string& kind, int64_t count = 1) {
    keel::wire::Command c;
    c.rank = -1;
    c.id = id;
    c.kind = kind;
    c.count = count;
    const auto payload = keel::wire::encode(c);
    socket_.send(zmq::buffer(std::string("cmd")), zmq::send_flags::sndmore);
    socket_.send(zmq::buffer(payload), zmq::send_flags::none);
  }
  // The next ack, counting the step records before it; nothing within `timeout`.
  std::optional<keel::wire::Ack> ack(std::chrono::milliseconds timeout, int* steps = nullptr) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      zmq::pollitem_t item{static_cast<void*>(socket_), 0, ZMQ_POLLIN, 0};
      if (zmq::poll(&item, 1, std::chrono::milliseconds(10)) == 0) continue;
      zmq::message_t topic, payload;
      if (!socket_.recv(topic) || !socket_.recv(payload)) continue;
      if (topic.to_string() == "step" && steps) ++*steps;
      if (topic.to_string() != "ack") continue;
      const auto decoded = keel::wire::decode(payload.data(), payload.size());
      if (decoded.ok) return std::get<keel::wire::Ack>(decoded.message);
    }
    return std::nullopt;
  }

 private:
  zmq::context_t context_{1};
  zmq::socket_t socket_{context_, zmq::socket_type::dealer};
};

TEST(CommandServer, AHistoryReaderThatStallsDelaysNoOtherClientsAck) {
  constexpr int kSteps = 400;
  const std::vector<KeptMessage> ring = ring_of(kSteps);
  CommandServerOptions options;
  options.endpoint = "tcp://127.0.0.1:*";
  options.send_high_water_mark = 10;   // a few messages queued per client: the rest must wait
  options.history = [&ring] { return ring; };
  CommandServer server(options);

  SmallBufferClient slow(server.bound_endpoint(), 10);
  slow.send(1, "history", kSteps);   // and reads nothing for now
  std::this_thread::sleep_for(std::chrono::milliseconds(100));

  SmallBufferClient other(server.bound_endpoint(), 1000);
  other.send(2, "describe");
  // The training thread takes the command and answers it.
  std::vector<keel::probe::PendingCommand> taken;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!server.take(taken) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_EQ(taken.size(), 1u) << "the command thread never took the other client's command";
  keel::wire::Ack answer;
  answer.id = taken[0].command.id;
  answer.ok = true;
  server.reply(taken[0].ticket, answer);
  const auto acked = other.ack(std::chrono::seconds(5));
  ASSERT_TRUE(acked);
  EXPECT_EQ(acked->id, 2u);

  // The stalled reader, reading now, still gets its whole answer: it was never cut short.
  int steps = 0;
  const auto history = slow.ack(std::chrono::seconds(10), &steps);
  ASSERT_TRUE(history);
  EXPECT_TRUE(history->ok) << history->error;
  EXPECT_EQ(history->count, kSteps);
  EXPECT_EQ(steps, kSteps);
}

// A client of another user keeps reconnecting (ZeroMQ retries every 100 ms) and fails the
// handshake each time: the first refusal is reported at once, the rest are folded into at
// most one report per interval, so they cannot flood the run's events.
TEST(CommandServer, ARefusedClientThatKeepsRetryingIsReportedOncePerInterval) {
  if (!keel::wire::curve_available()) GTEST_SKIP() << "this libzmq has no CURVE";
  const keel::wire::CurveKeyPair server = keel::wire::generate_curve_key_pair();
  const keel::wire::CurveKeyPair owner = keel::wire::generate_curve_key_pair();
  const keel::wire::CurveKeyPair other = keel::wire::generate_curve_key_pair();
  CommandServerOptions options;
  options.endpoint = "tcp://127.0.0.1:*";
  options.secret_key = server.secret_key;
  options.allowed_client_keys = {owner.public_key};
  options.refusal_report_interval = std::chrono::milliseconds(500);
  CommandServer commands(options);
  // The other user's client: its own key as the server's, as keel-cli's default would be.
  zmq::context_t context(1);
  zmq::socket_t intruder(context, zmq::socket_type::dealer);
  intruder.set(zmq::sockopt::linger, 0);
  intruder.set(zmq::sockopt::curve_serverkey, other.public_key);
  intruder.set(zmq::sockopt::curve_publickey, other.public_key);
  intruder.set(zmq::sockopt::curve_secretkey, other.secret_key);
  intruder.connect(commands.bound_endpoint());

  const auto start = std::chrono::steady_clock::now();
  std::vector<keel::probe::AuthRefusal> taken;
  int reports = 0;
  uint64_t attempts = 0;
  std::optional<double> first_report_secs;
  while (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(2500)) {
    if (commands.take_refusals(taken)) {
      ++reports;
      if (!first_report_secs) {
        first_report_secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      }
      for (const auto& r : taken) attempts += r.attempts;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(first_report_secs.has_value()) << "the refused client was never reported";
  EXPECT_LT(*first_report_secs, 1.5) << "the first refusal waits for no interval";
  EXPECT_LE(reports, 1 + 2500 / 500) << "more than one report per interval";
  EXPECT_GT(attempts, static_cast<uint64_t>(reports)) << "no attempts were folded into a report";
}

}  // namespace
