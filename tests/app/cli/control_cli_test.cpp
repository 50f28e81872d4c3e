// keel-cli's control commands against a fake probe command socket: `history` prints the ring
// like `tail` (and exits 1 on refusal, 2 on silence), `send dump` prints the ack with its path
// and size as one JSON line, `send policy` passes the policy's name and state.
#include <sys/wait.h>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/history_command.hpp"
#include "fake_command_server.hpp"
#include "test_publisher.hpp"

namespace keel::app {
namespace {

namespace wire = keel::wire;
using test_support::FakeCommandServer;

// A command socket that authenticates as a probe given no keys does: keel-cli's defaults are
// the path under test.
struct ProbeLikeServer : FakeCommandServer {
  explicit ProbeLikeServer(Handler handler)
      : FakeCommandServer(std::move(handler), "tcp://127.0.0.1:*", FakeCommandServer::Auth::kUsersOwnKey) {}
};

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

FakeCommandServer::Handler history_of(int64_t first, int64_t last) {
  return [first, last](const wire::Command& c) -> std::vector<wire::Message> {
    if (c.kind != "history") return {};
    std::vector<wire::Message> replies;
    for (int64_t s = first; s <= last; ++s) replies.push_back(test_support::sample_step(s));
    wire::Ack ack = FakeCommandServer::ack_for(c, true, last);
    ack.count = last - first + 1;
    replies.push_back(ack);
    return replies;
  };
}

HistoryOptions options_for(const FakeCommandServer& server) {
  HistoryOptions options;
  options.endpoint = test_support::unused_endpoint();  // no description: layers by index
  options.command_endpoint = server.endpoint();
  options.describe_wait_secs = 0.1;
  options.timeout_secs = 5;
  return options;
}

TEST(HistoryCli, PrintsTheRingOldestFirstAsJsonLines) {
  ProbeLikeServer server(history_of(3, 7));
  HistoryOptions options = options_for(server);
  options.json = true;
  options.count = 100;
  std::ostringstream out, err;
  EXPECT_EQ(run_history(options, out, err), 0) << err.str();
  const std::vector<std::string> lines = lines_of(out.str());
  ASSERT_EQ(lines.size(), 5u) << out.str();
  for (size_t i = 0; i < lines.size(); ++i) {
    const nlohmann::json line = nlohmann::json::parse(lines[i]);
    EXPECT_EQ(line["type"], "step");
    EXPECT_EQ(line["step"], int64_t(i) + 3);
  }
  EXPECT_NE(err.str().find("5 steps from the probe's history (3..7)"), std::string::npos) << err.str();
  ASSERT_EQ(server.received().size(), 1u);
  EXPECT_EQ(server.received()[0].kind, "history");
  EXPECT_EQ(server.received()[0].count, 100);
}

TEST(HistoryCli, RefusalExitsWith1AndSilenceWith2) {
  ProbeLikeServer refusing([](const wire::Command& c) -> std::vector<wire::Message> {
    wire::Ack ack = FakeCommandServer::ack_for(c, false, -1);
    ack.error = "not supported by this probe yet";
    return {ack};
  });
  std::ostringstream out, err;
  EXPECT_EQ(run_history(options_for(refusing), out, err), 1);
  EXPECT_NE(err.str().find("refused the history request: not supported by this probe yet"), std::string::npos);

  ProbeLikeServer silent([](const wire::Command&) -> std::vector<wire::Message> { return {}; });
  HistoryOptions options = options_for(silent);
  options.timeout_secs = 0.3;
  std::ostringstream out2, err2;
  EXPECT_EQ(run_history(options, out2, err2), 2);
  EXPECT_NE(err2.str().find("no answer from"), std::string::npos) << err2.str();
}

// Runs keel-cli; returns its exit status, stdout in `out`.
int run_cli(const std::string& args, std::string& out) {
  FILE* pipe = popen((std::string(KEEL_CLI_PATH) + " " + args + " 2>/dev/null").c_str(), "r");
  if (pipe == nullptr) return -1;
  char buffer[4096];
  out.clear();
  while (fgets(buffer, sizeof buffer, pipe)) out += buffer;
  const int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(SendCli, DumpPrintsOkStepPathAndBytesAsOneJsonLine) {
  ProbeLikeServer server([](const wire::Command& c) -> std::vector<wire::Message> {
    wire::Ack ack = FakeCommandServer::ack_for(c, true, 512);
    ack.path = "/tmp/keel-dumps/step-512-" + c.label;
    ack.bytes = 1234567;
    return {ack};
  });
  std::string out;
  EXPECT_EQ(run_cli("send --command-endpoint " + server.endpoint() + " dump --label before-lr", out), 0);
  const std::vector<std::string> lines = lines_of(out);
  ASSERT_EQ(lines.size(), 1u) << out;
  const nlohmann::json ack = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(ack["ok"], true);
  EXPECT_EQ(ack["step"], 512);
  EXPECT_EQ(ack["path"], "/tmp/keel-dumps/step-512-before-lr");
  EXPECT_EQ(ack["bytes"], 1234567);
  ASSERT_EQ(server.received().size(), 1u);
  EXPECT_EQ(server.received()[0].kind, "dump");
  EXPECT_EQ(server.received()[0].label, "before-lr");
}

TEST(SendCli, PolicyPassesNameAndStateAndARefusalExits1) {
  ProbeLikeServer server([](const wire::Command& c) -> std::vector<wire::Message> {
    if (c.policy == "skip_spike") return {FakeCommandServer::ack_for(c, true, 40)};
    wire::Ack ack = FakeCommandServer::ack_for(c, false, -1);
    ack.error = "unknown policy \"" + c.policy + "\"";
    return {ack};
  });
  std::string out;
  EXPECT_EQ(run_cli("send --command-endpoint " + server.endpoint() + " policy skip_spike on", out), 0);
  EXPECT_EQ(run_cli("send --command-endpoint " + server.endpoint() + " policy no_such off", out), 1);
  ASSERT_EQ(server.received().size(), 2u);
  EXPECT_EQ(server.received()[0].policy, "skip_spike");
  EXPECT_TRUE(server.received()[0].enable);
  EXPECT_EQ(server.received()[1].policy, "no_such");
  EXPECT_FALSE(server.received()[1].enable);
}

TEST(SendCli, SkipAtAStepPassesTheStepForEveryRankToSkip) {
  ProbeLikeServer server([](const wire::Command& c) -> std::vector<wire::Message> {
    return {FakeCommandServer::ack_for(c, true, c.at_step)};
  });
  std::string out;
  EXPECT_EQ(run_cli("send --command-endpoint " + server.endpoint() + " skip --count 2 --at-step 812", out), 0);
  EXPECT_EQ(run_cli("send --command-endpoint " + server.endpoint() + " skip", out), 0);
  ASSERT_EQ(server.received().size(), 2u);
  EXPECT_EQ(server.received()[0].at_step, 812);
  EXPECT_EQ(server.received()[0].count, 2);
  EXPECT_EQ(server.received()[1].at_step, -1) << "without --at-step: the next update";
  EXPECT_EQ(nlohmann::json::parse(lines_of(out).at(0))["ok"], true);
}

}  // namespace
}  // namespace keel::app
