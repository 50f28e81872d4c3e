// keel-cli's control commands against a fake probe command socket: `history` prints the ring
// like `tail`, its newest N steps with every event the probe keeps (and exits 1 on refusal, 2
// on silence), `send dump` prints the ack with its path
// and size as one JSON line, `send policy` passes the policy's name and state.
#include <sys/wait.h>

#include <algorithm>
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
  EXPECT_EQ(server.received()[0].count, kWholeRing) << "the events come only with the whole ring";
}

// A probe's ring of steps first..last, with a change of layers before `relayout` (-1: none),
// answered as the probe answers (PROTOCOL §6): the events it keeps follow the steps, all of
// them for the whole ring and only those of the steps sent for a shorter answer.
FakeCommandServer::Handler ring_with_events(int64_t first, int64_t last, int64_t relayout,
                                            std::vector<wire::Event> events) {
  return [=](const wire::Command& c) -> std::vector<wire::Message> {
    if (c.kind != "history") return {};
    const int64_t sent_first = std::max(first, last - c.count + 1);
    std::vector<wire::Message> replies;
    wire::RunDescription before = test_support::sample_run();
    wire::RunDescription after = before;
    after.layers[0].name = "fc1.weight_v2";
    replies.push_back(sent_first < relayout || relayout < 0 ? before : after);
    for (int64_t s = sent_first; s <= last; ++s) {
      if (s == relayout && s != sent_first) replies.push_back(after);
      replies.push_back(test_support::sample_step(s));
    }
    for (const wire::Event& event : events) {
      if (sent_first == first || event.step >= sent_first) replies.push_back(event);
    }
    wire::Ack ack = FakeCommandServer::ack_for(c, true, last);
    ack.count = last - sent_first + 1;
    replies.push_back(ack);
    return replies;
  };
}

wire::Event event_at(int64_t step, const std::string& kind) {
  wire::Event event;
  event.step = step;
  event.kind = kind;
  event.layer = "fc1.weight";
  event.detail = kind + " at step " + std::to_string(step);
  return event;
}

// The README's `history --count 100 --json` printed no events: the probe sends only those of
// the steps it sends, and the first non-finite step was older than the newest 100.
TEST(HistoryCli, CountPrintsTheNewestStepsAndEveryEventTheProbeKeeps) {
  ProbeLikeServer server(ring_with_events(0, 99, -1, {event_at(20, "first_nonfinite"), event_at(98, "spike")}));
  HistoryOptions options = options_for(server);
  options.json = true;
  options.count = 3;
  std::ostringstream out, err;
  EXPECT_EQ(run_history(options, out, err), 0) << err.str();
  std::vector<std::string> types;
  std::vector<int64_t> steps;
  for (const std::string& line : lines_of(out.str())) {
    const nlohmann::json json = nlohmann::json::parse(line);
    types.push_back(json["type"]);
    if (json["type"] != "run") steps.push_back(json["step"]);
  }
  EXPECT_EQ(types, (std::vector<std::string>{"run", "step", "step", "step", "event", "event"})) << out.str();
  EXPECT_EQ(steps, (std::vector<int64_t>{97, 98, 99, 20, 98}));
  EXPECT_NE(err.str().find("3 of the 100 steps in the probe's history (97..99) and 2 events"), std::string::npos)
      << err.str();

  options.json = false;
  std::ostringstream table, table_err;
  EXPECT_EQ(run_history(options, table, table_err), 0) << table_err.str();
  EXPECT_NE(table.str().find("event first_nonfinite        step 20"), std::string::npos) << table.str();
  for (const char* row : {"\n      97    0 ", "\n      98    0 ", "\n      99    0 "}) {
    EXPECT_NE(table.str().find(row), std::string::npos) << row << " in\n" << table.str();
  }
  EXPECT_EQ(table.str().find("\n      96    0 "), std::string::npos) << table.str();
  ASSERT_EQ(server.received().size(), 2u);
  EXPECT_EQ(server.received()[0].count, kWholeRing) << "the events come only with the whole ring";
}

// The newest steps of a ring that spans a change of layers come with the description each
// was published under, in its place, and are named by it.
TEST(HistoryCli, TheNewestStepsKeepTheDescriptionsTheyWerePublishedUnder) {
  ProbeLikeServer server(ring_with_events(0, 99, 50, {}));
  HistoryOptions options = options_for(server);
  options.json = true;
  auto names_by_step = [&](int64_t count) {
    options.count = count;
    std::ostringstream out, err;
    EXPECT_EQ(run_history(options, out, err), 0) << err.str();
    std::vector<std::string> named;   // "run" for a description, else the step's first layer
    for (const std::string& line : lines_of(out.str())) {
      const nlohmann::json json = nlohmann::json::parse(line);
      named.push_back(json["type"] == "run" ? "run" : std::to_string(json["step"].get<int64_t>()) + " " +
                                                          json["layers"][0]["name"].get<std::string>());
    }
    named.resize(std::min<size_t>(named.size(), 5));
    return named;
  };
  EXPECT_EQ(names_by_step(2), (std::vector<std::string>{"run", "98 fc1.weight_v2", "99 fc1.weight_v2"}));
  EXPECT_EQ(names_by_step(51), (std::vector<std::string>{"run", "49 fc1.weight", "run", "50 fc1.weight_v2",
                                                         "51 fc1.weight_v2"}))
      << "the first five";
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
