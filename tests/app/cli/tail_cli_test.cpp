// Runs the real keel-cli binary against in-test publishers: exit statuses, stderr messages,
// --count, --json, the default table and Ctrl-C are what a user or a script relies on.
#include <signal.h>

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "background_publisher.hpp"
#include "cli_process.hpp"
#include "test_publisher.hpp"

namespace keel::app {
namespace {

using namespace std::chrono_literals;
using test_support::BackgroundPublisher;
using test_support::CliProcess;
using test_support::sample_run;
using test_support::sample_step;
using test_support::TestPublisher;
namespace wire = keel::wire;

void run_then_steps(TestPublisher& publisher, int i) {
  if (i % 3 == 0) {
    publisher.send(sample_run());
  } else {
    publisher.send(sample_step(i));
  }
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(TailCli, NoPublisherExitsWithStatus2AndSaysSo) {
  const std::string endpoint = test_support::unused_endpoint();
  const auto start = std::chrono::steady_clock::now();
  CliProcess cli({"tail", "--endpoint", endpoint, "--timeout", "1"});
  ASSERT_TRUE(cli.started());
  EXPECT_EQ(cli.wait_exit(10s), 2);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, 900ms);
  EXPECT_LT(took, 8s);
  EXPECT_TRUE(cli.read_all_lines(1s).empty());
  const std::string err = cli.read_stderr(1s);
  EXPECT_TRUE(contains(err, "keel-cli: nothing received from " + endpoint + " within 1 s")) << err;
}

TEST(TailCli, JsonPrintsOneObjectPerLineAndStopsAfterCount) {
  BackgroundPublisher publisher(run_then_steps);
  CliProcess cli({"tail", "--endpoint", publisher.endpoint(), "--count", "5", "--json"});
  ASSERT_TRUE(cli.started());
  const std::vector<std::string> lines = cli.read_all_lines(10s);
  EXPECT_EQ(cli.wait_exit(10s), 0);
  ASSERT_EQ(lines.size(), 5u);
  bool described = false;
  for (const std::string& line : lines) {
    const nlohmann::json json = nlohmann::json::parse(line);
    ASSERT_TRUE(json["type"] == "run" || json["type"] == "step") << line;
    if (json["type"] == "run") {
      described = true;
      continue;
    }
    // Names come from the last description seen; before any, the fallback.
    EXPECT_EQ(json["layers"][1]["name"], described ? "fc1.bias" : "layer1") << line;
  }
  EXPECT_TRUE(described);
}

// A GAN's two probes, both rank 0 of world 1, on their own endpoints: every step line carries
// its run and model and is named by its own run's description, never by the other's (which,
// keyed by rank, was whichever description came last).
TEST(TailCli, TwoProbesOnOneRankEachPrintTheirOwnRunAndLayerNames) {
  auto probe_of = [](const std::string& run_id, const std::string& model) {
    return [run_id, model](TestPublisher& publisher, int i) {
      wire::RunDescription run = sample_run();
      run.run_id = run_id;
      run.model = model;
      run.world_size = 1;
      run.layers = {{model + ".fc.weight", {4}, 4, "float32"},
                    {model + ".fc.bias", {4}, 4, "float32"}};
      if (i % 3 == 0) {
        publisher.send(run);
        return;
      }
      wire::StepRecord step = sample_step(i);
      step.run = run_id;
      step.model = model;
      publisher.send(step);
    };
  };
  BackgroundPublisher generator(probe_of("gan-1", "generator"));
  BackgroundPublisher critic(probe_of("gan-2", "critic"));
  // These publishers take no commands: each one's stream is held for the 2 s its history
  // request waits, then printed whole (some 200 lines each), so both are in the first 500.
  CliProcess cli(
      {"tail", "-e", generator.endpoint(), "-e", critic.endpoint(), "--json", "-n", "500"});
  ASSERT_TRUE(cli.started());
  const std::vector<std::string> lines = cli.read_all_lines(10s);
  EXPECT_EQ(cli.wait_exit(10s), 0);
  ASSERT_EQ(lines.size(), 500u);
  const std::map<std::string, std::string> model_of_run = {{"gan-1", "generator"},
                                                            {"gan-2", "critic"}};
  std::set<std::string> described, named;
  for (const std::string& line : lines) {
    const nlohmann::json json = nlohmann::json::parse(line);
    ASSERT_TRUE(json.contains("run") && json.contains("model")) << line;
    ASSERT_EQ(model_of_run.count(json["run"]), 1u) << line;
    const std::string model = model_of_run.at(json["run"]);
    EXPECT_EQ(json["model"], model) << line;
    EXPECT_EQ(json["rank"], 0) << line;
    if (json["type"] == "run") {
      described.insert(model);
      continue;
    }
    ASSERT_EQ(json["type"], "step") << line;
    // Before its own run's description, the fallback; never the other run's names.
    const bool own = json["layers"][1]["name"] == model + ".fc.bias";
    const bool fallback = described.count(model) == 0 && json["layers"][1]["name"] == "layer1";
    EXPECT_TRUE(own || fallback) << line;
    if (own) named.insert(model);
  }
  EXPECT_EQ(named, (std::set<std::string>{"generator", "critic"}));
}

TEST(TailCli, TableIsTheDefault) {
  BackgroundPublisher publisher(run_then_steps);
  CliProcess cli({"tail", "-e", publisher.endpoint(), "-n", "4"});
  ASSERT_TRUE(cli.started());
  std::string text;
  for (const std::string& line : cli.read_all_lines(10s)) text += line + "\n";
  EXPECT_EQ(cli.wait_exit(10s), 0);
  EXPECT_TRUE(contains(text, "worst layer")) << text;
  EXPECT_TRUE(contains(text, "fc1.weight (1)") || contains(text, "layer0 (1)")) << text;
  EXPECT_FALSE(contains(text, "{\"type\""));
}

// A run stepping every cycle, described now and then, with an event every tenth step.
void steps_and_events(TestPublisher& publisher, int i) {
  if (i % 25 == 0) publisher.send(sample_run());
  publisher.send(sample_step(i));
  if (i % 10 == 3) {
    wire::Event spike;
    spike.kind = "spike";
    spike.step = i;
    publisher.send(spike);
  }
}

// A trainer steps tens of times a second: --every N keeps one step in N, the same steps on
// every rank, and never drops an event.
TEST(TailCli, EveryPrintsTheStepsThatAreMultiplesOfNAndEveryEvent) {
  BackgroundPublisher publisher(steps_and_events);
  CliProcess cli({"tail", "-e", publisher.endpoint(), "--json", "--every", "5", "--count", "30"});
  ASSERT_TRUE(cli.started());
  const std::vector<std::string> lines = cli.read_all_lines(10s);
  EXPECT_EQ(cli.wait_exit(10s), 0);
  ASSERT_EQ(lines.size(), 30u);
  std::vector<int64_t> steps, events;
  for (const std::string& line : lines) {
    const nlohmann::json json = nlohmann::json::parse(line);
    if (json["type"] == "step") steps.push_back(json["step"]);
    if (json["type"] == "event") events.push_back(json["step"]);
  }
  ASSERT_GE(steps.size(), 5u);
  for (int64_t step : steps) EXPECT_EQ(step % 5, 0) << "step " << step;
  for (size_t i = 1; i < steps.size(); ++i) EXPECT_EQ(steps[i], steps[i - 1] + 5) << "none of them left out";
  ASSERT_GE(events.size(), 3u);
  for (int64_t step : events) EXPECT_EQ(step % 10, 3) << "every event, whatever its step";
}

TEST(TailCli, EventsOnlyPrintsNothingButEvents) {
  BackgroundPublisher publisher(steps_and_events);
  CliProcess json({"tail", "-e", publisher.endpoint(), "--json", "--events-only", "--count", "3"});
  ASSERT_TRUE(json.started());
  const std::vector<std::string> lines = json.read_all_lines(10s);
  EXPECT_EQ(json.wait_exit(10s), 0);
  ASSERT_EQ(lines.size(), 3u);
  for (const std::string& line : lines) EXPECT_EQ(nlohmann::json::parse(line)["type"], "event") << line;

  CliProcess table({"tail", "-e", publisher.endpoint(), "--events-only", "--count", "3"});
  ASSERT_TRUE(table.started());
  const std::vector<std::string> rows = table.read_all_lines(10s);
  EXPECT_EQ(table.wait_exit(10s), 0);
  ASSERT_EQ(rows.size(), 3u);
  for (const std::string& row : rows) EXPECT_EQ(row.rfind("event spike", 0), 0u) << row;

  CliProcess both({"tail", "-e", publisher.endpoint(), "--events-only", "--every", "5"});
  ASSERT_TRUE(both.started());
  EXPECT_NE(both.wait_exit(10s), 0) << "--every has no steps to thin under --events-only";
  EXPECT_TRUE(contains(both.read_stderr(1s), "excludes")) << "says why";
}

// The table's column header scrolled away after the first screenful and never came back. As
// vmstat's does, it comes back every screenful: 24 lines when the output is not a terminal.
TEST(TailCli, TheTableRepeatsItsHeaderEveryScreenful) {
  BackgroundPublisher publisher(run_then_steps);
  CliProcess cli({"tail", "-e", publisher.endpoint(), "-n", "80"});
  ASSERT_TRUE(cli.started());
  const std::vector<std::string> lines = cli.read_all_lines(10s);
  EXPECT_EQ(cli.wait_exit(10s), 0);
  std::vector<size_t> headers;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (contains(lines[i], "worst layer")) headers.push_back(i);
  }
  ASSERT_GE(headers.size(), 3u);
  std::string text;
  for (const std::string& line : lines) text += line + "\n";
  for (size_t i = 1; i < headers.size(); ++i) EXPECT_LE(headers[i] - headers[i - 1], 23u) << text;
  EXPECT_LE(lines.size() - headers.back(), 23u) << text;
}

TEST(TailCli, SilenceAfterTheFirstMessageExitsWithStatus2) {
  BackgroundPublisher publisher(run_then_steps);
  CliProcess cli({"tail", "-e", publisher.endpoint(), "--json", "--timeout", "1"});
  ASSERT_TRUE(cli.started());
  std::string first;
  ASSERT_TRUE(cli.read_line(first, 10s));
  publisher.stop();
  cli.read_all_lines(10s);
  EXPECT_EQ(cli.wait_exit(10s), 2);
  const std::string err = cli.read_stderr(1s);
  EXPECT_TRUE(contains(err, "keel-cli: nothing received from " + publisher.endpoint() +
                                " for 1 s after message"))
      << err;
}

TEST(TailCli, CtrlCExitsCleanly) {
  BackgroundPublisher publisher(run_then_steps);
  CliProcess cli({"tail", "-e", publisher.endpoint(), "--timeout", "60"});
  ASSERT_TRUE(cli.started());
  std::string first;
  // A printed line means the handler is installed (it is set up before tail starts).
  ASSERT_TRUE(cli.read_line(first, 10s));
  ASSERT_EQ(kill(cli.pid(), SIGINT), 0);
  EXPECT_EQ(cli.wait_exit(5s), 0);
  EXPECT_EQ(cli.read_stderr(1s), "");
}

TEST(TailCli, UndecodableMessagesAreReportedAndSkipped) {
  BackgroundPublisher publisher([](TestPublisher& pub, int i) {
    pub.send_frames({"step", "not msgpack"});
    pub.send(sample_step(i));
  });
  CliProcess cli({"tail", "-e", publisher.endpoint(), "--json", "--count", "2"});
  ASSERT_TRUE(cli.started());
  const std::vector<std::string> lines = cli.read_all_lines(10s);
  EXPECT_EQ(cli.wait_exit(10s), 0);
  EXPECT_EQ(lines.size(), 2u);
  const std::string err = cli.read_stderr(1s);
  EXPECT_TRUE(contains(err, "keel-cli: warning: dropped an undecodable message")) << err;
}

// A probe that takes no keys (allow_unauthenticated_local) and tail presenting the user's own:
// the handshake fails on the mechanism, and tail says so and names --no-auth, which then works.
TEST(TailCli, AProbeThatTakesNoKeysIsNamedWithTheWayToReachIt) {
  BackgroundPublisher publisher(run_then_steps, test_support::ServerAuth::kNone);
  CliProcess refused({"tail", "--endpoint", publisher.endpoint(), "--timeout", "2"});
  ASSERT_TRUE(refused.started());
  EXPECT_EQ(refused.wait_exit(10s), 2);
  EXPECT_TRUE(refused.read_all_lines(1s).empty());
  const std::string err = refused.read_stderr(1s);
  EXPECT_TRUE(contains(err, "keel-cli: refused: " + publisher.endpoint() + " takes no keys")) << err;
  EXPECT_TRUE(contains(err, "connect with --no-auth")) << err;

  CliProcess plain({"tail", "--endpoint", publisher.endpoint(), "--count", "3", "--json", "--no-auth"});
  ASSERT_TRUE(plain.started());
  EXPECT_EQ(plain.read_all_lines(10s).size(), 3u);
  EXPECT_EQ(plain.wait_exit(10s), 0);
}

// The other way round: a probe that takes keys, and tail with --no-auth.
TEST(TailCli, NoAuthAgainstAProbeThatTakesKeysSaysKeysAreRequired) {
  BackgroundPublisher publisher(run_then_steps);
  CliProcess cli({"tail", "--endpoint", publisher.endpoint(), "--timeout", "2", "--no-auth"});
  ASSERT_TRUE(cli.started());
  EXPECT_EQ(cli.wait_exit(10s), 2);
  const std::string err = cli.read_stderr(1s);
  EXPECT_TRUE(contains(err, publisher.endpoint() + " requires keys: leave out --no-auth")) << err;
}

TEST(TailCli, InvalidEndpointExitsWithStatus1) {
  CliProcess cli({"tail", "--endpoint", "localhost:5557", "--timeout", "1"});
  ASSERT_TRUE(cli.started());
  EXPECT_EQ(cli.wait_exit(10s), 1);
  EXPECT_TRUE(contains(cli.read_stderr(1s), "cannot connect to 'localhost:5557'"));
}

}  // namespace
}  // namespace keel::app
