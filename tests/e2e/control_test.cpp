// Trainer control end to end over tcp loopback: the real keel-demo, the real `keel-cli send`
// and `keel-cli tail --json`. A skip acknowledged at step S shows in the telemetry as step S
// skipped by "command" with no update in any layer, and training goes on around it.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "background_tail.hpp"
#include "child_process.hpp"

namespace {

using keel::e2e::free_port_pair;

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs `command`, returns its exit status and its stdout in `out`.
int run(const std::string& command, std::string& out) {
  out.clear();
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return -1;
  char buffer[4096];
  while (fgets(buffer, sizeof(buffer), pipe)) out += buffer;
  const int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool wait_for(const std::string& path, const std::string& needle, int timeout_ms) {
  for (int waited = 0; waited < timeout_ms; waited += 50) {
    if (read_file(path).find(needle) != std::string::npos) return true;
    usleep(50000);
  }
  return false;
}

TEST(Control, SkipSentByKeelCliIsAcknowledgedAndShowsInTheTelemetry) {
  const int port = free_port_pair();
  ASSERT_GT(port, 0);
  const std::string endpoint = "tcp://127.0.0.1:" + std::to_string(port);
  const std::string dir = ::testing::TempDir();
  const std::string demo_out = dir + "/keel_e2e_control_demo.txt", demo_rc = dir + "/keel_e2e_control_demo.rc";
  std::remove(demo_rc.c_str());

  keel::e2e::BackgroundTail tail(KEEL_CLI_PATH, endpoint, dir + "/keel_e2e_control_tail");
  ASSERT_TRUE(tail.started());
  constexpr int kSteps = 200;
  const std::string demo = "(" KEEL_DEMO_PATH " --steps " + std::to_string(kSteps) + " --log-every 0 --endpoint " +
                           endpoint + " > " + demo_out + " 2>&1; echo $? > " + demo_rc + ") &";
  ASSERT_EQ(std::system(demo.c_str()), 0);
  ASSERT_FALSE(tail.wait_for("\"type\":\"step\"", 60).empty()) << "no step telemetry: " << read_file(demo_out);

  std::string ack_line;
  const int status = run(KEEL_CLI_PATH " send --endpoint " + endpoint + " --timeout 20 skip --count 1", ack_line);
  ASSERT_EQ(status, 0) << ack_line;
  const auto ack = nlohmann::json::parse(ack_line);
  EXPECT_EQ(ack["type"], "ack");
  EXPECT_TRUE(ack["ok"].get<bool>());
  EXPECT_NE(ack["id"].get<uint64_t>(), 0u);
  const int64_t skipped = ack["step"].get<int64_t>();
  ASSERT_GT(skipped, 0);
  EXPECT_EQ(ack["count"], 1) << "the updates the skip covers: " << ack_line;

  // A refusal travels the same way and exits 1.
  std::string refusal_line;
  EXPECT_EQ(run(KEEL_CLI_PATH " send --endpoint " + endpoint + " skip --count 0 2>/dev/null", refusal_line), 1);
  const auto refusal = nlohmann::json::parse(refusal_line);
  EXPECT_FALSE(refusal["ok"].get<bool>());
  EXPECT_NE(refusal["error"].get<std::string>().find("skip count"), std::string::npos);

  ASSERT_TRUE(wait_for(demo_rc, "\n", 120000)) << "keel-demo did not finish";
  EXPECT_EQ(read_file(demo_rc), "0\n") << read_file(demo_out);
  // The last record may still be on its way when the trainer exits.
  tail.wait_for("\"step\":" + std::to_string(kSteps - 1) + ",\"loss\"", 20);
  ASSERT_TRUE(tail.stop()) << "keel-cli tail did not finish";

  std::map<int64_t, nlohmann::json> steps;
  bool skip_event = false;
  std::istringstream lines(tail.output());
  for (std::string line; std::getline(lines, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j["type"] == "step") steps[j["step"].get<int64_t>()] = j;
    if (j["type"] == "event" && j["kind"] == "skip" && j["step"] == skipped) skip_event = true;
  }
  ASSERT_TRUE(steps.count(skipped)) << "step " << skipped << " was not received";
  const auto& s = steps[skipped];
  EXPECT_TRUE(s["skipped"].get<bool>());
  EXPECT_EQ(s["skip_reason"], "command");
  ASSERT_FALSE(s["layers"].empty());
  for (const auto& layer : s["layers"]) EXPECT_EQ(layer["update_ratio"].get<double>(), 0.0) << layer["name"];
  EXPECT_TRUE(skip_event) << "no skip event at step " << skipped;
  // Exactly one update was skipped: the neighbours applied theirs.
  for (const auto& [step, j] : steps) {
    if (step != skipped) {
      EXPECT_FALSE(j["skipped"].get<bool>()) << "step " << step;
    }
  }
  ASSERT_TRUE(steps.count(skipped + 1));
  double moved = 0;
  for (const auto& layer : steps[skipped + 1]["layers"]) moved += layer["update_ratio"].get<double>();
  EXPECT_GT(moved, 0.0);
}

// A rewind sent by keel-cli to keel-demo (snapshots every 20 steps): acknowledged with the
// snapshot's step, the interrupted step skipped as "rewind" with a rewind event, and the demo
// going on from the snapshot's step to its last.
TEST(Control, ARewindSentByKeelCliGoesBackToASnapshotAndTrainingGoesOnToTheEnd) {
  const int port = free_port_pair();
  ASSERT_GT(port, 0);
  const std::string endpoint = "tcp://127.0.0.1:" + std::to_string(port);
  const std::string dir = ::testing::TempDir();
  const std::string demo_out = dir + "/keel_e2e_rewind_demo.txt", demo_rc = dir + "/keel_e2e_rewind_demo.rc";
  std::remove(demo_rc.c_str());

  keel::e2e::BackgroundTail tail(KEEL_CLI_PATH, endpoint, dir + "/keel_e2e_rewind_tail");
  ASSERT_TRUE(tail.started());
  constexpr int kSteps = 160;
  const std::string demo = "(" KEEL_DEMO_PATH " --steps " + std::to_string(kSteps) +
                           " --log-every 0 --rewind-every 20 --pace 40 --endpoint " + endpoint + " > " + demo_out +
                           " 2>&1; echo $? > " + demo_rc + ") &";
  ASSERT_EQ(std::system(demo.c_str()), 0);
  ASSERT_FALSE(tail.wait_for("\"step\":45,\"loss\"", 60).empty()) << "no step 45: " << read_file(demo_out);

  std::string ack_line;
  ASSERT_EQ(run(KEEL_CLI_PATH " send --endpoint " + endpoint + " --timeout 20 rewind", ack_line), 0) << ack_line;
  const auto ack = nlohmann::json::parse(ack_line);
  EXPECT_TRUE(ack["ok"].get<bool>()) << ack_line;
  const int64_t to = ack["step"].get<int64_t>();
  EXPECT_GE(to, 40);
  EXPECT_EQ(to % 20, 0) << "a snapshot's step: " << ack_line;

  ASSERT_TRUE(wait_for(demo_rc, "\n", 120000)) << "keel-demo did not finish";
  EXPECT_EQ(read_file(demo_rc), "0\n") << read_file(demo_out);
  const std::string printed = read_file(demo_out);
  EXPECT_NE(printed.find("event rewind"), std::string::npos) << printed;
  EXPECT_NE(printed.find("to step " + std::to_string(to) + " (command"), std::string::npos) << printed;
  tail.wait_for("\"step\":" + std::to_string(kSteps - 1) + ",\"loss\"", 20);
  ASSERT_TRUE(tail.stop()) << "keel-cli tail did not finish";

  int64_t rewound_from = -1, last_step = -1;
  bool event = false;
  std::istringstream lines(tail.output());
  for (std::string line; std::getline(lines, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j["type"] == "step") {
      if (j["skip_reason"] == "rewind") rewound_from = j["step"].get<int64_t>();
      last_step = j["step"].get<int64_t>();
    }
    if (j["type"] == "event" && j["kind"] == "rewind") event = true;
  }
  EXPECT_GT(rewound_from, to) << "the step the rewind interrupted, skipped";
  EXPECT_TRUE(event);
  EXPECT_EQ(last_step, kSteps - 1) << "training went on from the snapshot to the last step";
}

TEST(Control, SendWithoutAProbeTimesOutWithStatusTwo) {
  const int port = free_port_pair();
  ASSERT_GT(port, 0);
  std::string out;
  const std::string err = ::testing::TempDir() + "/keel_e2e_control_timeout.err";
  EXPECT_EQ(run(KEEL_CLI_PATH " send --endpoint tcp://127.0.0.1:" + std::to_string(port) +
                    " --timeout 0.5 describe 2>" + err,
                out),
            2);
  EXPECT_TRUE(out.empty()) << out;
  EXPECT_NE(read_file(err).find("no acknowledgement"), std::string::npos) << read_file(err);
}

}  // namespace
