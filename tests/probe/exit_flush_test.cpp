// A probe that ends serves its clients a last time (exit_flush.hpp): it answers the history
// request a client announced (a backfill:<token> subscription) even when the request comes
// after training is over, gives a client that may have been waiting for its address the time
// to connect, and otherwise ends at once; the whole wait is bounded by exit_flush_secs.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "command_rig.hpp"
#include "keel/wire/codec.hpp"
#include "transport/exit_flush.hpp"
#include "users_key_client.hpp"

// Named: the tests build as one unity translation unit, where anonymous namespaces merge.
namespace exit_flush_test {

using Clock = std::chrono::steady_clock;
using keel::test::Client;

struct Trainer {
  explicit Trainer(keel::probe::ProbeOptions options)
      : opt(net->parameters(), torch::optim::AdamWOptions(1e-2)),
        probe(std::make_unique<keel::probe::Probe>(*net, opt, options)) {}
  void train(int steps) {
    for (int s = 0; s < steps; ++s) {
      keel::test::forward_backward(net, opt, s);
      probe->step(torch::tensor(1.0));
    }
  }
  // How long the probe's end took, in seconds.
  double end() {
    const auto start = Clock::now();
    probe.reset();
    return std::chrono::duration<double>(Clock::now() - start).count();
  }
  keel::test::TwoLayer net;
  torch::optim::AdamW opt;
  std::unique_ptr<keel::probe::Probe> probe;
};

// A subscriber as keel's clients make one: the user's key, every topic, and (`token` not "")
// the announcement of a history request to come.
std::unique_ptr<zmq::socket_t> reader(zmq::context_t& context, const std::string& endpoint, const std::string& token) {
  auto socket = std::make_unique<zmq::socket_t>(context, zmq::socket_type::sub);
  socket->set(zmq::sockopt::linger, 0);
  keel::test::present_users_key(*socket);
  socket->set(zmq::sockopt::subscribe, "");
  if (!token.empty()) socket->set(zmq::sockopt::subscribe, std::string(keel::wire::kHistoryIntentPrefix) + token);
  socket->connect(endpoint);
  return socket;
}

bool receives_a_description(zmq::socket_t& socket) {
  const auto end = Clock::now() + std::chrono::seconds(10);
  zmq::message_t topic, payload;
  while (Clock::now() < end) {
    zmq::pollitem_t item{static_cast<void*>(socket), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds(50));
    while (socket.recv(topic, zmq::recv_flags::dontwait)) {
      if (socket.recv(payload, zmq::recv_flags::dontwait) && topic.to_string() == keel::wire::kTopicRun) return true;
    }
  }
  return false;
}

// A loopback port P with P + 1 free too (the command socket's), right now.
int free_port_pair() {
  zmq::context_t context{1};
  for (int attempt = 0; attempt < 50; ++attempt) {
    zmq::socket_t a{context, zmq::socket_type::pub}, b{context, zmq::socket_type::pub};
    a.set(zmq::sockopt::linger, 0);
    b.set(zmq::sockopt::linger, 0);
    a.bind("tcp://127.0.0.1:*");
    const std::string bound = a.get(zmq::sockopt::last_endpoint);
    const int port = std::stoi(bound.substr(bound.rfind(':') + 1));
    if (port >= 65535) continue;
    try {
      b.bind("tcp://127.0.0.1:" + std::to_string(port + 1));
    } catch (const zmq::error_t&) {
      continue;
    }
    return port;
  }
  return -1;
}

TEST(ExitFlush, OnlyAFixedAddressCanHaveClientsWaitingBeforeTheBind) {
  EXPECT_FALSE(keel::probe::clients_may_wait_on("tcp://127.0.0.1:*"));
  EXPECT_FALSE(keel::probe::clients_may_wait_on("tcp://127.0.0.1:0"));
  EXPECT_FALSE(keel::probe::clients_may_wait_on(""));
  EXPECT_TRUE(keel::probe::clients_may_wait_on("tcp://127.0.0.1:5557"));
  EXPECT_TRUE(keel::probe::clients_may_wait_on("ipc:///tmp/keel.sock"));
}

// The waits these tests expect not to happen are told from a bound far above them, with room for
// a loaded machine (the sanitizer build runs them too): a probe that waited would take 10 s.
static keel::probe::ProbeOptions with_a_far_bound() {
  keel::probe::ProbeOptions options = keel::test::listening();
  options.exit_flush_secs = 10.0;
  return options;
}
constexpr double kWellUnderTheBound = 5.0;

TEST(ExitFlush, AProbeNobodyWatchesOnAWildcardPortEndsAtOnce) {
  Trainer trainer(with_a_far_bound());
  trainer.train(3);
  EXPECT_LT(trainer.end(), kWellUnderTheBound);
}

// A client retrying its connection (every 100 ms by ZeroMQ's default) may be there before the
// probe bound: a probe that lived less than the window waits out the rest of it, no more.
TEST(ExitFlush, ABriefProbeOnAFixedAddressWaitsTheConnectWindowOnly) {
  const int port = free_port_pair();
  ASSERT_GT(port, 0);
  keel::probe::ProbeOptions options = with_a_far_bound();
  options.endpoint = "tcp://127.0.0.1:" + std::to_string(port);
  Trainer trainer(options);
  const double took = trainer.end();
  EXPECT_GE(took, 0.8 * std::chrono::duration<double>(keel::probe::kConnectWindow).count());
  EXPECT_LT(took, kWellUnderTheBound);
}

TEST(ExitFlush, TheEndAnswersTheHistoryRequestOfAClientThatSubscribedJustBefore) {
  Trainer trainer(with_a_far_bound());
  trainer.train(5);
  zmq::context_t context{1};
  auto sub = reader(context, trainer.probe->bound_endpoint(), "late-client");
  ASSERT_TRUE(receives_a_description(*sub));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));   // its announcement too is read
  // The client sends its request only once the probe has begun to end.
  const std::string commands = trainer.probe->bound_command_endpoint();
  std::optional<keel::wire::Ack> ack;
  std::vector<int64_t> steps;
  std::thread client([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    Client dealer(commands);
    keel::wire::Command history = keel::test::command(7, "history");
    history.count = 100;
    history.token = "late-client";
    dealer.send(history);
    ack = dealer.receive(5000);
    for (const std::string& payload : dealer.steps()) {
      const auto decoded = keel::wire::decode(payload.data(), payload.size());
      if (decoded.ok) steps.push_back(std::get<keel::wire::StepRecord>(decoded.message).step);
    }
  });
  const double took = trainer.end();
  client.join();
  ASSERT_TRUE(ack.has_value()) << "the probe was gone before the request came";
  EXPECT_TRUE(ack->ok) << ack->error;
  EXPECT_EQ(ack->count, 5);
  EXPECT_EQ(steps, (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_GE(took, 0.25);
  EXPECT_LT(took, kWellUnderTheBound);
}

TEST(ExitFlush, TheWaitForARequestThatNeverComesEndsAtExitFlushSecs) {
  keel::probe::ProbeOptions options = keel::test::listening();
  options.exit_flush_secs = 0.4;
  Trainer trainer(options);
  trainer.train(2);
  zmq::context_t context{1};
  auto sub = reader(context, trainer.probe->bound_endpoint(), "never-asks");
  ASSERT_TRUE(receives_a_description(*sub));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const double took = trainer.end();
  EXPECT_GE(took, 0.35);
  EXPECT_LT(took, kWellUnderTheBound);
}

TEST(ExitFlush, AClientThatLeftBeforeAskingOrNeverAnnouncedIsNotWaitedFor) {
  Trainer trainer(with_a_far_bound());
  trainer.train(2);
  zmq::context_t context{1};
  auto gone = reader(context, trainer.probe->bound_endpoint(), "gone");
  auto plain = reader(context, trainer.probe->bound_endpoint(), "");
  ASSERT_TRUE(receives_a_description(*gone));
  ASSERT_TRUE(receives_a_description(*plain));
  gone.reset();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));   // the probe sees it close
  EXPECT_LT(trainer.end(), kWellUnderTheBound);
}

}  // namespace exit_flush_test
