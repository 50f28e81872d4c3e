// The dashboard's command thread against a fake probe command socket (ROUTER) over loopback:
// each command is sent once, its ack (with step, path, bytes) or refusal comes back to the
// right command, silence becomes "timed out" without a resend, and a late ack still shows; a
// refused handshake is told with its fix.
#include "net/command_client.hpp"
#include "net/command_socket.hpp"

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

#include "fake_command_server.hpp"
#include "test_publisher.hpp"

namespace keel::app {
namespace {

namespace wire = keel::wire;
using test_support::FakeCommandServer;
using Clock = std::chrono::steady_clock;

CommandStatus wait_while_pending(const CommandClient& client, uint64_t id, double secs = 10) {
  const auto give_up = Clock::now() + std::chrono::duration<double>(secs);
  std::optional<CommandStatus> status = client.status(id);
  while (status && status->state == CommandState::kPending && Clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    status = client.status(id);
  }
  EXPECT_TRUE(status.has_value());
  return status.value_or(CommandStatus{});
}

// Waits (at most 10 s) until the server has received `count` commands.
bool wait_received(const FakeCommandServer& server, size_t count) {
  const auto give_up = Clock::now() + std::chrono::seconds(10);
  while (server.received().size() < count && Clock::now() < give_up) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return server.received().size() >= count;
}

wire::Command command(const std::string& kind) {
  wire::Command out;
  out.rank = -1;
  out.kind = kind;
  return out;
}

TEST(CommandClient, SkipIsAcknowledgedWithTheStepItTookEffectAt) {
  FakeCommandServer server([](const wire::Command& c) -> std::vector<wire::Message> {
    return {FakeCommandServer::ack_for(c, true, 1234)};
  });
  CommandClient client;
  wire::Command skip = command("skip");
  skip.count = 2;
  const uint64_t id = client.submit(server.endpoint(), skip);
  EXPECT_EQ(client.status(id)->state, CommandState::kPending);
  const CommandStatus status = wait_while_pending(client, id);
  EXPECT_EQ(status.state, CommandState::kAcknowledged);
  EXPECT_EQ(status.ack.step, 1234);
  EXPECT_EQ(status.ack.id, id);
  EXPECT_FALSE(status.answered_late);
  ASSERT_EQ(server.received().size(), 1u);
  EXPECT_EQ(server.received()[0].kind, "skip");
  EXPECT_EQ(server.received()[0].count, 2);
  EXPECT_EQ(server.received()[0].id, id);
}

TEST(CommandClient, DumpAckCarriesPathAndBytes) {
  FakeCommandServer server([](const wire::Command& c) -> std::vector<wire::Message> {
    wire::Ack ack = FakeCommandServer::ack_for(c, true, 77);
    ack.path = "/tmp/keel-dumps/step-77-" + c.label;
    ack.bytes = 5 << 20;
    return {ack};
  });
  CommandClient client;
  wire::Command dump = command("dump");
  dump.label = "before-lr-bump";
  const CommandStatus status = wait_while_pending(client, client.submit(server.endpoint(), dump));
  EXPECT_EQ(status.state, CommandState::kAcknowledged);
  EXPECT_EQ(status.ack.path, "/tmp/keel-dumps/step-77-before-lr-bump");
  EXPECT_EQ(status.ack.bytes, 5 << 20);
}

TEST(CommandClient, RefusalKeepsTheProbesSentence) {
  FakeCommandServer server([](const wire::Command& c) -> std::vector<wire::Message> {
    wire::Ack ack = FakeCommandServer::ack_for(c, false, -1);
    ack.error = "dump refused: the last dump was 3 steps ago, at most one per 100 steps";
    return {ack};
  });
  CommandClient client;
  const CommandStatus status = wait_while_pending(client, client.submit(server.endpoint(), command("dump")));
  EXPECT_EQ(status.state, CommandState::kRefused);
  EXPECT_EQ(status.error, "dump refused: the last dump was 3 steps ago, at most one per 100 steps");
}

TEST(CommandClient, AcksReachTheirOwnCommandsInWhateverOrderTheyCome) {
  // Answers each policy command at once and holds the skip until the policy one came.
  std::vector<wire::Command> held;
  FakeCommandServer server([&held](const wire::Command& c) -> std::vector<wire::Message> {
    if (c.kind == "skip") {
      held.push_back(c);
      return {};
    }
    std::vector<wire::Message> replies{FakeCommandServer::ack_for(c, true, 10)};
    for (const wire::Command& waiting : held) replies.push_back(FakeCommandServer::ack_for(waiting, true, 11));
    held.clear();
    return replies;
  });
  CommandClient client;
  const uint64_t skip_id = client.submit(server.endpoint(), command("skip"));
  ASSERT_TRUE(wait_received(server, 1)) << "the skip never reached the server";
  wire::Command policy = command("policy");
  policy.policy = "skip_spike";
  policy.enable = true;
  const uint64_t policy_id = client.submit(server.endpoint(), policy);
  EXPECT_NE(skip_id, policy_id);
  EXPECT_EQ(wait_while_pending(client, policy_id).ack.step, 10);
  EXPECT_EQ(wait_while_pending(client, skip_id).ack.step, 11);
}

TEST(CommandClient, SilenceTimesOutWithoutAResend) {
  FakeCommandServer server([](const wire::Command&) -> std::vector<wire::Message> { return {}; });
  CommandClientOptions options;
  options.timeout_secs = 0.3;
  CommandClient client(options);
  const uint64_t id = client.submit(server.endpoint(), command("skip"));
  const CommandStatus status = wait_while_pending(client, id);
  EXPECT_EQ(status.state, CommandState::kTimedOut);
  EXPECT_NE(status.error.find("no answer within 0.3 s"), std::string::npos) << status.error;
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(server.received().size(), 1u) << "a timed-out skip must never be sent again";
}

TEST(CommandClient, ALateAckAfterTheTimeoutIsShownAsLate) {
  // The probe answers the first command only when the second one arrives.
  std::vector<wire::Command> waiting;
  FakeCommandServer server([&waiting](const wire::Command& c) -> std::vector<wire::Message> {
    if (waiting.empty()) {
      waiting.push_back(c);
      return {};
    }
    return {FakeCommandServer::ack_for(waiting[0], true, 5), FakeCommandServer::ack_for(c, true, 6)};
  });
  CommandClientOptions options;
  options.timeout_secs = 0.2;
  CommandClient client(options);
  const uint64_t first = client.submit(server.endpoint(), command("skip"));
  ASSERT_EQ(wait_while_pending(client, first).state, CommandState::kTimedOut);
  const uint64_t second = client.submit(server.endpoint(), command("describe"));
  EXPECT_EQ(wait_while_pending(client, second).state, CommandState::kAcknowledged);
  const CommandStatus late = *client.status(first);
  EXPECT_EQ(late.state, CommandState::kAcknowledged);
  EXPECT_TRUE(late.answered_late);
  EXPECT_EQ(late.ack.step, 5);
}

// A socket failure on the command thread used to leave the thread with its exception, which
// ended the dashboard (issue 12, item 8). Now the commands in flight end as timed out, saying
// why, and the next command goes out on fresh sockets.
TEST(CommandClient, AChannelFailureEndsTheCommandsInFlightAndTheClientGoesOn) {
  FakeCommandServer server([](const wire::Command& c) -> std::vector<wire::Message> {
    if (c.kind == "skip") return {};   // stays in flight
    return {FakeCommandServer::ack_for(c, true, 5)};
  });
  std::atomic<bool> fail_next_turn{false};
  CommandClientOptions options;
  options.before_each_turn = [&fail_next_turn] {
    if (fail_next_turn.exchange(false)) throw std::runtime_error("injected socket failure");
  };
  CommandClient client(options);
  const uint64_t in_flight = client.submit(server.endpoint(), command("skip"));
  ASSERT_TRUE(wait_received(server, 1));

  fail_next_turn = true;
  const CommandStatus failed = wait_while_pending(client, in_flight);
  EXPECT_EQ(failed.state, CommandState::kTimedOut);
  EXPECT_NE(failed.error.find("the command channel failed (injected socket failure)"), std::string::npos) << failed.error;
  EXPECT_NE(failed.error.find("not resent"), std::string::npos) << failed.error;

  const CommandStatus next = wait_while_pending(client, client.submit(server.endpoint(), command("policy")));
  EXPECT_EQ(next.state, CommandState::kAcknowledged) << next.error;
  EXPECT_EQ(server.received().size(), 2u) << "the skip in flight is not resent";
}

TEST(CommandClient, NoCommandEndpointIsRefusedAtOnce) {
  CommandClient client;
  const uint64_t id = client.submit("", command("skip"));
  const CommandStatus status = *client.status(id);
  EXPECT_EQ(status.state, CommandState::kRefused);
  EXPECT_NE(status.error.find("no port + 1"), std::string::npos);
  const CommandStatus bad = wait_while_pending(client, client.submit("not-an-endpoint", command("skip")));
  EXPECT_EQ(bad.state, CommandState::kRefused);
  EXPECT_NE(bad.error.find("not-an-endpoint"), std::string::npos);
}

TEST(CommandClient, UnknownIdsHaveNoStatus) {
  CommandClient client;
  EXPECT_FALSE(client.status(42).has_value());
}

// The command socket says why a probe refused it, as the telemetry socket does: the user's own
// keys against a command socket that takes none (its keyless check, a DEALER as the socket is,
// completes the handshake), and no keys against one that requires them.
// A command the probe's handshake refuses was never delivered: the dashboard shows it refused,
// with why, when its wait runs out, rather than "no answer".
TEST(CommandClient, ACommandARefusedHandshakeNeverDeliveredIsShownRefusedWithWhy) {
  FakeCommandServer open_probe([](const wire::Command& c) { return std::vector<wire::Message>{FakeCommandServer::ack_for(c, true, 1)}; });
  CommandClientOptions options;
  options.timeout_secs = 2;
  options.auth = ClientAuth::from_options({});
  CommandClient client(options);
  const CommandStatus status = wait_while_pending(client, client.submit(open_probe.endpoint(), command("skip")));
  EXPECT_EQ(status.state, CommandState::kRefused);
  EXPECT_NE(status.error.find("not delivered: refused: " + open_probe.endpoint() + " takes no keys"), std::string::npos)
      << status.error;
  EXPECT_TRUE(open_probe.received().empty());
}

TEST(CommandSocket, ARefusedHandshakeIsToldWithTheFix) {
  const auto refusal_within = [](CommandSocket& socket, const std::string& part) {
    const auto give_up = Clock::now() + std::chrono::seconds(5);
    while (socket.refusal().find(part) == std::string::npos && Clock::now() < give_up) socket.receive(20);
    return socket.refusal();
  };
  FakeCommandServer open_probe([](const wire::Command&) { return std::vector<wire::Message>{}; });
  CommandSocket keyed(open_probe.endpoint(), ClientAuth::from_options({}));
  const std::string no_keys_taken = refusal_within(keyed, "takes no keys (its probe");
  EXPECT_NE(no_keys_taken.find(open_probe.endpoint() + " takes no keys"), std::string::npos) << no_keys_taken;

  FakeCommandServer keyed_probe([](const wire::Command&) { return std::vector<wire::Message>{}; }, "tcp://127.0.0.1:*",
                                FakeCommandServer::Auth::kUsersOwnKey);
  CommandSocket unkeyed(keyed_probe.endpoint());
  const std::string keys_required = refusal_within(unkeyed, "requires keys");
  EXPECT_NE(keys_required.find(keyed_probe.endpoint() + " requires keys"), std::string::npos) << keys_required;
}

}  // namespace
}  // namespace keel::app
