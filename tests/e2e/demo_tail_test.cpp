// keel-demo with an injected NaN, tailed by keel-cli over tcp loopback: every step record
// carries every layer, the event names the layer and step, that step is skipped, and the
// loss stays finite afterwards. A malformed fault flag says the form it takes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "background_tail.hpp"
#include "child_process.hpp"

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> list_layers() {
  std::vector<std::string> names;
  FILE* pipe = popen(KEEL_DEMO_PATH " --list-layers", "r");
  char line[512];
  while (pipe && fgets(line, sizeof(line), pipe)) {
    std::string s(line);
    names.push_back(s.substr(0, s.find(' ')));
  }
  if (pipe) pclose(pipe);
  return names;
}

TEST(DemoTail, InjectedNanIsReportedSkippedAndTrainingRecovers) {
  const auto layers = list_layers();
  ASSERT_GT(layers.size(), 10u);
  const std::string injected = "blocks.1.mlp.fc.weight";
  const int64_t nan_step = 30, steps = 60;
  const int port = keel::e2e::free_port_pair();   // the probe binds port + 1 for commands
  ASSERT_GT(port, 0);
  const std::string endpoint = "tcp://127.0.0.1:" + std::to_string(port);
  const std::string dir = ::testing::TempDir();

  // Started before the trainer: the steps published before its subscription went live come
  // from the probe's ring (client_first_test.cpp has the short runs).
  keel::e2e::BackgroundTail tail(KEEL_CLI_PATH, endpoint, dir + "/keel_e2e_tail");
  ASSERT_TRUE(tail.started());
  const std::string demo = KEEL_DEMO_PATH " --steps " + std::to_string(steps) + " --log-every 0 --endpoint " +
                           endpoint + " --inject-nan " + std::to_string(nan_step) + ":" + injected + " > " + dir +
                           "/keel_e2e_demo.txt";
  ASSERT_EQ(std::system(demo.c_str()), 0) << read_file(dir + "/keel_e2e_demo.txt");
  // The last record may still be on its way when the trainer exits.
  tail.wait_for("\"step\":" + std::to_string(steps - 1) + ",\"loss\"", 20);
  ASSERT_TRUE(tail.stop()) << "keel-cli tail did not finish";

  std::map<int64_t, nlohmann::json> steps_seen;
  std::vector<nlohmann::json> events;
  bool described = false;
  std::istringstream lines(tail.output());
  for (std::string line; std::getline(lines, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j["type"] == "run") {
      described = true;
      ASSERT_EQ(j["layers"].size(), layers.size());
      for (size_t i = 0; i < layers.size(); ++i) EXPECT_EQ(j["layers"][i]["name"], layers[i]);
    } else if (j["type"] == "step") {
      steps_seen[j["step"].get<int64_t>()] = j;
    } else if (j["type"] == "event") {
      events.push_back(j);
    }
  }
  ASSERT_TRUE(described);
  ASSERT_TRUE(steps_seen.count(nan_step)) << "the NaN step was not received";
  ASSERT_TRUE(steps_seen.count(steps - 1)) << "the last step was not received";

  for (const auto& [step, j] : steps_seen) {
    ASSERT_EQ(j["layers"].size(), layers.size()) << "step " << step;
    for (const char* field : {"grad_norm", "grad_absmax", "grad_nonfinite", "grad_zero_frac", "param_norm",
                              "update_ratio"}) {
      ASSERT_TRUE(j["layers"][0].contains(field)) << field;
    }
    EXPECT_EQ(j["skipped"].get<bool>(), step == nan_step) << "step " << step;
    if (step > nan_step) {
      EXPECT_TRUE(j["loss"].is_number() && std::isfinite(j["loss"].get<double>())) << step;
    }
  }
  const auto& bad = steps_seen[nan_step];
  EXPECT_EQ(bad["skip_reason"], "nonfinite");
  for (const auto& layer : bad["layers"]) {
    EXPECT_EQ(layer["grad_nonfinite"].get<int64_t>(), layer["name"] == injected ? 1 : 0) << layer["name"];
  }

  bool first = false, skip = false;
  for (const auto& e : events) {
    if (e["kind"] == "first_nonfinite") {
      first = true;
      EXPECT_EQ(e["layer"], injected);
      EXPECT_EQ(e["step"], nan_step);
    }
    if (e["kind"] == "skip" && e["step"] == nan_step) skip = true;
  }
  EXPECT_TRUE(first);
  EXPECT_TRUE(skip);
}

// A fault flag given without its colon says the form it takes, as its help spells it:
// `--inject-nan 200` once answered "expected STEP:VALUE" for a flag that takes STEP:LAYER.
TEST(DemoFlags, AMalformedFaultFlagNamesTheFormItTakes) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--inject-nan", "STEP:LAYER"}, {"--inject-spike", "STEP:FACTOR"}, {"--lr-spike", "STEP:FACTOR"}};
  for (const auto& [flag, form] : cases) {
    keel::e2e::ChildProcess demo({KEEL_DEMO_PATH, flag, "200", "--endpoint", ""});
    const std::string line = demo.wait_for("expected ", 60);
    EXPECT_NE(demo.wait_exit(), 0) << flag;
    EXPECT_NE(line.find("expected " + form + ", got '200'"), std::string::npos) << flag << ": " << line;
  }
  keel::e2e::ChildProcess bad_factor({KEEL_DEMO_PATH, "--inject-spike", "200:ten", "--endpoint", ""});
  EXPECT_NE(bad_factor.wait_for("expected STEP:FACTOR, got '200:ten'", 60), "");
  EXPECT_NE(bad_factor.wait_exit(), 0);
}

}  // namespace
