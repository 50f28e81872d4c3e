// A client that is there first sees everything (issue 57): keel-cli tail, or the dashboard's
// own network thread and model, waits on the endpoint before keel-demo starts, and the run
// lasts under a second. Every step from 0 and every event arrive, each once: the steps the
// probe published before the subscription reached it come from its ring, and a probe that
// ends answers the history request of a client that just subscribed before it exits.
#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "background_tail.hpp"
#include "child_process.hpp"
#include "model/model.hpp"
#include "net/receiver.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using keel::e2e::ChildProcess;

// A tiny model (a few hundred steps/s here): `steps` steps take well under a second.
std::vector<std::string> demo_args(const std::string& endpoint, int64_t steps, int64_t nan_step) {
  return {KEEL_DEMO_PATH, "--steps", std::to_string(steps), "--endpoint", endpoint, "--width", "16",
          "--layers", "1", "--context", "16", "--batch", "2", "--threads", "1", "--log-every", "0",
          "--inject-nan", std::to_string(nan_step) + ":tok.weight", "--no-dump-nonfinite", "--record-dir", ""};
}

std::string free_endpoint() {
  const int port = keel::e2e::free_port_pair();   // the probe binds port + 1 for commands
  return port > 0 ? "tcp://127.0.0.1:" + std::to_string(port) : std::string();
}

TEST(ClientFirst, KeelCliTailStartedBeforeAShortRunPrintsEveryStepAndEventOnce) {
  constexpr int64_t kSteps = 60, kNanStep = 20;
  const std::string endpoint = free_endpoint();
  ASSERT_FALSE(endpoint.empty());
  keel::e2e::BackgroundTail tail(KEEL_CLI_PATH, endpoint, ::testing::TempDir() + "/keel_client_first_tail");
  ASSERT_TRUE(tail.started());
  // The tail is waiting (connecting, and retrying) before the trainer binds.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  ChildProcess demo(demo_args(endpoint, kSteps, kNanStep));
  EXPECT_EQ(demo.wait_exit(), 0) << demo.output();
  // The probe has exited: whatever the tail will print has reached it.
  tail.wait_for("\"step\":" + std::to_string(kSteps - 1) + ",\"loss\"", 20);
  ASSERT_TRUE(tail.stop()) << "keel-cli tail did not finish";

  std::map<int64_t, int> steps_seen;
  std::map<uint64_t, int> events_seen;
  int first_nonfinite = 0, skips = 0;
  std::istringstream lines(tail.output());
  for (std::string line; std::getline(lines, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j["type"] == "step") ++steps_seen[j["step"].get<int64_t>()];
    if (j["type"] != "event") continue;
    ++events_seen[j["seq"].get<uint64_t>()];
    if (j["kind"] == "first_nonfinite") {
      ++first_nonfinite;
      EXPECT_EQ(j["step"], kNanStep);
      EXPECT_EQ(j["layer"], "tok.weight");
    }
    if (j["kind"] == "skip" && j["step"] == kNanStep) ++skips;
  }
  std::ostringstream missing;
  for (int64_t step = 0; step < kSteps; ++step) {
    if (steps_seen.count(step) == 0) missing << ' ' << step;
  }
  EXPECT_EQ(missing.str(), "") << "steps never printed";
  for (const auto& [step, times] : steps_seen) EXPECT_EQ(times, 1) << "step " << step;
  EXPECT_EQ(steps_seen.size(), size_t(kSteps));
  for (const auto& [seq, times] : events_seen) EXPECT_EQ(times, 1) << "event seq " << seq;
  EXPECT_EQ(first_nonfinite, 1);
  EXPECT_EQ(skips, 1);
}

// Shorter still: the run is over before a client of ZeroMQ's default reconnect interval
// (100 ms) has even retried. The dashboard waiting for it still holds every step once.
TEST(ClientFirst, TheDashboardWaitingBeforeARunOfAFewStepsHoldsEveryStepAndEventOnce) {
  constexpr int64_t kSteps = 12, kNanStep = 5;
  const std::string endpoint = free_endpoint();
  ASSERT_FALSE(endpoint.empty());
  keel::app::ReceiverOptions options;
  options.auth = keel::app::ClientAuth::from_options({});
  keel::app::Receiver receiver({endpoint}, options);
  keel::app::Model model;
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  ChildProcess demo(demo_args(endpoint, kSteps, kNanStep));
  EXPECT_EQ(demo.wait_exit(), 0) << demo.output();

  std::vector<keel::wire::Message> inbox;
  const auto give_up = Clock::now() + std::chrono::seconds(20);
  while (Clock::now() < give_up) {
    inbox.clear();
    receiver.drain(inbox);
    for (const keel::wire::Message& message : inbox) model.ingest(message);
    const keel::app::RunModel* run = model.current_run(0);
    if (run && run->has_steps() && run->last_step() == kSteps - 1 &&
        receiver.endpoint_states().at(0).backfill_outcomes > 0) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const keel::app::EndpointState state = receiver.endpoint_states().at(0);
  const keel::app::RunModel* run = model.current_run(0);
  ASSERT_NE(run, nullptr) << "nothing arrived; backfill: " << state.backfill;
  ASSERT_TRUE(run->has_steps()) << state.backfill;
  EXPECT_EQ(run->first_step(), 0) << state.backfill;
  EXPECT_EQ(run->last_step(), kSteps - 1) << state.backfill;
  const keel::app::RunCounters& counters = run->counters();
  EXPECT_EQ(counters.steps_stored, uint64_t(kSteps)) << state.backfill;
  EXPECT_EQ(counters.duplicate_steps, 0u);
  int first_nonfinite = 0, skips = 0;
  std::map<uint64_t, int> events_seen;
  for (const keel::wire::Event& event : run->events()) {
    ++events_seen[event.seq];
    if (event.kind == "first_nonfinite" && event.step == kNanStep) ++first_nonfinite;
    if (event.kind == "skip" && event.step == kNanStep) ++skips;
  }
  for (const auto& [seq, times] : events_seen) EXPECT_EQ(times, 1) << "event seq " << seq;
  EXPECT_EQ(first_nonfinite, 1) << state.backfill;
  EXPECT_EQ(skips, 1) << state.backfill;
}

}  // namespace
