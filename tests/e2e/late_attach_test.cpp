// Late attach end to end: the real keel-demo has trained past step 500 when a client attaches.
// The dashboard's own network thread and model (Receiver + Model) then hold the steps from
// before it attached, from the probe's ring, joined to the live stream with no gap and no
// duplicate; `keel-cli history` prints the same ring, and the events older than the steps it
// prints.
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "child_process.hpp"
#include "model/model.hpp"
#include "net/receiver.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using keel::e2e::ChildProcess;

// A tiny model (about 180 steps/s here), so step 500 comes within seconds; its NaN at step 20
// is long out of the newest steps by then, as a run's first non-finite step is by morning.
constexpr int64_t kNanStep = 20;
std::vector<std::string> demo_args(const std::string& endpoint) {
  return {KEEL_DEMO_PATH, "--steps", "0", "--endpoint", endpoint, "--width", "16", "--layers", "1",
          "--context", "16", "--batch", "2", "--threads", "1", "--log-every", "100",
          "--inject-nan", std::to_string(kNanStep) + ":tok.weight", "--no-dump-nonfinite"};
}

class LateAttach : public testing::Test {
 protected:
  void SetUp() override {
    const int port = keel::e2e::free_port_pair();
    ASSERT_GT(port, 0);
    endpoint_ = "tcp://127.0.0.1:" + std::to_string(port);
    demo_ = std::make_unique<ChildProcess>(demo_args(endpoint_));
    // "step    500  loss ...": the trainer is past step 500 before any client exists.
    ASSERT_FALSE(demo_->wait_for("step    500 ", 120).empty()) << demo_->output();
  }
  std::string endpoint_;
  std::unique_ptr<ChildProcess> demo_;
};

TEST_F(LateAttach, TheDashboardModelGetsTheStepsBeforeItAttachedWithoutGapOrDuplicate) {
  // As the dashboard does: its history request presents the user's own key.
  keel::app::ReceiverOptions options;
  options.auth = keel::app::ClientAuth::from_options({});
  keel::app::Receiver receiver({endpoint_}, options);
  keel::app::Model model;
  std::vector<keel::wire::Message> inbox;
  const auto give_up = Clock::now() + std::chrono::seconds(60);
  int64_t first_live_seen = -1;
  while (Clock::now() < give_up) {
    inbox.clear();
    receiver.drain(inbox);
    for (const keel::wire::Message& message : inbox) model.ingest(message);
    const keel::app::RunModel* run = model.current_run(0);
    const keel::app::EndpointState state = receiver.endpoint_states().at(0);
    if (run && run->has_steps() && state.backfill_outcomes > 0) {
      if (first_live_seen < 0) first_live_seen = run->last_step();
      if (run->last_step() >= first_live_seen + 50) break;  // well into the live stream
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const keel::app::EndpointState state = receiver.endpoint_states().at(0);
  EXPECT_EQ(state.backfill.rfind("backfilled ", 0), 0u) << state.backfill;
  const keel::app::RunModel* run = model.current_run(0);
  ASSERT_NE(run, nullptr);
  ASSERT_TRUE(run->has_steps());
  // The demo's ring (4096 steps) still holds its first step.
  EXPECT_EQ(run->first_step(), 0) << state.backfill;
  EXPECT_GE(first_live_seen, 500);
  const keel::app::RunCounters& counters = run->counters();
  EXPECT_EQ(counters.steps_stored, uint64_t(run->last_step() - run->first_step() + 1))
      << "a hole between " << run->first_step() << " and " << run->last_step();
  EXPECT_EQ(counters.duplicate_steps, 0u);
  EXPECT_EQ(counters.seq_gaps, 0u);
  EXPECT_EQ(counters.probe_dropped, 0u);
}

TEST_F(LateAttach, KeelCliHistoryPrintsTheRingOldestFirst) {
  FILE* pipe = popen((std::string(KEEL_CLI_PATH) + " history --endpoint " + endpoint_ +
                      " --count 200 --json 2>/dev/null").c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char chunk[65536];
  while (fgets(chunk, sizeof chunk, pipe)) out += chunk;
  const int status = pclose(pipe);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  std::istringstream lines(out);
  std::vector<int64_t> steps;
  bool described = false, first_nonfinite = false;
  for (std::string line; std::getline(lines, line);) {
    const nlohmann::json message = nlohmann::json::parse(line);
    if (message["type"] == "run") described = true;
    if (message["type"] == "event" && message["kind"] == "first_nonfinite") {
      first_nonfinite = true;
      EXPECT_EQ(message["step"], kNanStep);
      EXPECT_EQ(message["layer"], "tok.weight");
    }
    if (message["type"] == "step") {
      steps.push_back(message["step"].get<int64_t>());
      // Layers are printed by name: the description came first.
      EXPECT_EQ(message["layers"][0]["name"], "tok.weight");
    }
  }
  EXPECT_TRUE(described);
  EXPECT_TRUE(first_nonfinite) << "the run's first non-finite step, older than the 200 steps printed";
  ASSERT_EQ(steps.size(), 200u);
  EXPECT_GE(steps.front(), 300);
  for (size_t i = 1; i < steps.size(); ++i) ASSERT_EQ(steps[i], steps[i - 1] + 1) << "at " << i;
}

}  // namespace
