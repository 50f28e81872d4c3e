// Dumps and policies end to end: the real keel-demo, controlled by the real `keel-cli send`.
// A dump asked for by keel-cli loads into a fresh model and optimizer and holds exactly the
// weights the telemetry reported for the acknowledged step; a dump directory too full for the
// dump or the reserve, or read-only (a tmpfs in a private mount namespace), gives a
// dump_failed event, no file under a final name, and training that goes on; an injected spike is skipped only with the spike
// policy on; an injected NaN dumps exactly once.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "child_process.hpp"
#include "keel/probe/torch_compat.hpp"
#include "dump/remove_tree.hpp"
#include "trainer.hpp"

namespace {

namespace fs = std::filesystem;
using keel::e2e::ChildProcess;

fs::path fresh_dir(const std::string& tag) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("keel-e2e-" + tag + "-" + std::to_string(::getpid()));
  keel::probe::remove_tree(dir.string());   // not fs::remove_all: jumps to 0 under libtorch 2.x
  fs::create_directories(dir);
  return dir;
}

std::vector<std::string> entries(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  return out;
}

// Every line of a finished child's output.
std::string run_to_end(ChildProcess& child, double timeout_secs) {
  child.wait_for("\x01never printed", timeout_secs);
  return child.output();
}

int count_of(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

TEST(DumpE2E, DumpFromKeelCliLoadsIntoAFreshModelAndHoldsTheAcknowledgedStepsWeights) {
  const int port = keel::e2e::free_port_pair();
  ASSERT_GT(port, 0);
  const std::string endpoint = "tcp://127.0.0.1:" + std::to_string(port);
  const fs::path dumps = fresh_dir("dump-cli");
  ChildProcess tail({KEEL_CLI_PATH, "tail", "--json", "--timeout", "20", "--endpoint", endpoint});
  ChildProcess demo({KEEL_DEMO_PATH, "--steps", "400", "--pace", "20", "--log-every", "0", "--endpoint", endpoint,
                     "--dump-dir", dumps.string()});
  // A few updates first, so AdamW has state for the dump to hold.
  for (int64_t seen = -1; seen < 5;) {
    const std::string line = tail.wait_for("\"type\":\"step\"", 90);
    ASSERT_NE(line, "") << demo.output();
    seen = nlohmann::json::parse(line)["step"].get<int64_t>();
  }

  ChildProcess send({KEEL_CLI_PATH, "send", "--endpoint", endpoint, "--timeout", "30", "dump", "--label", "e2e check"});
  const std::string ack_line = send.wait_for("\"type\":\"ack\"", 40);
  ASSERT_NE(ack_line, "") << send.output();
  const auto ack = nlohmann::json::parse(ack_line);
  ASSERT_TRUE(ack["ok"].get<bool>()) << ack_line;
  const int64_t step = ack["step"].get<int64_t>();
  const fs::path dir = ack["path"].get<std::string>();
  EXPECT_EQ(dir.parent_path(), dumps);
  EXPECT_EQ(dir.filename(), "step-" + std::to_string(step) + "-command-e2e_check");
  int64_t on_disk = 0;
  for (const auto& e : fs::directory_iterator(dir)) on_disk += static_cast<int64_t>(fs::file_size(e.path()));
  EXPECT_EQ(ack["bytes"].get<int64_t>(), on_disk);

  // The telemetry of that step: param_norm is measured before the step's update, which is
  // the state a dump at that step holds.
  nlohmann::json record;
  for (int i = 0; i < 2000 && record.is_null(); ++i) {
    const std::string line = tail.wait_for("\"type\":\"step\"", 20);
    ASSERT_NE(line, "") << "telemetry ended before step " << step;
    const auto j = nlohmann::json::parse(line);
    if (j["step"].get<int64_t>() == step) record = j;
  }
  ASSERT_FALSE(record.is_null());

  keel::demo::Trainer fresh{keel::demo::TrainerConfig{}};
  torch::load(fresh.model(), (dir / "model.pt").string());
  torch::load(fresh.optimizer(), (dir / "optimizer.pt").string());
  std::map<std::string, double> reported;
  for (const auto& layer : record["layers"]) reported[layer["name"]] = layer["param_norm"].get<double>();
  ASSERT_EQ(reported.size(), fresh.model()->named_parameters().size());
  for (const auto& p : fresh.model()->named_parameters()) {
    const double loaded = p.value().norm().item<double>();
    EXPECT_NEAR(loaded, reported.at(p.key()), 1e-5 * reported.at(p.key()) + 1e-7) << p.key();
  }
  // AdamW's step count is the number of updates applied before the dump's step.
  const torch::Tensor first = fresh.model()->parameters().front();
  const auto key = keel::probe::compat::optimizer_state_key(first);
  ASSERT_EQ(fresh.optimizer().state().count(key), 1u) << ack_line;
  EXPECT_EQ(static_cast<torch::optim::AdamWParamState&>(*fresh.optimizer().state().at(key)).step(), step);
}

// keel-demo with a NaN at step 20 inside a private mount namespace whose dump directory is a
// tmpfs of `size` prepared by `prepare`; prints the dump directory's entries after training.
// The dump must leave `min_free` bytes free (--dump-min-free).
std::string demo_in_namespace(const fs::path& mount_point, const std::string& size, const std::string& prepare,
                              const std::string& min_free) {
  const std::string script = "mount -t tmpfs -o size=" + size + " keel-dumps " + mount_point.string() + " && " + prepare +
                             " && " KEEL_DEMO_PATH " --steps 60 --log-every 59 --endpoint '' --inject-nan "
                             "20:blocks.0.attn.qkv.weight --dump-min-free " + min_free + " --dump-dir " +
                             mount_point.string() + "; echo \"demo exit $?\"; echo \"entries: [$(ls -A " +
                             mount_point.string() + ")]\"";
  ChildProcess shell({"/usr/bin/unshare", "--user", "--map-root-user", "--mount", "/bin/sh", "-c", script});
  return run_to_end(shell, 120);
}

bool private_mounts_work() {
  ChildProcess probe({"/usr/bin/unshare", "--user", "--map-root-user", "--mount", "/bin/sh", "-c",
                      "mount -t tmpfs none /tmp && echo mounted"});
  return probe.wait_for("mounted", 10) != "";
}

TEST(DumpE2E, AFullOrReadOnlyDumpDirectoryIsAnEventAndTrainingGoesOn) {
  if (!private_mounts_work()) {
    GTEST_SKIP() << "unshare --user --mount is not permitted here; dump failures are covered in-process by "
                    "Dump.AnUnwritableDumpDirectoryIsAnEventAndAnErrorAckAndTrainingGoesOn and "
                    "CheckpointWriter.AWriteFailingHalfWayLeavesNoFileAndSaysWhy";
  }
  const fs::path mount_point = fresh_dir("dump-faults");
  // Training goes on and nothing is left in the dump directory, whatever stops the dump.
  auto expect_refused = [](const std::string& out, const std::string& why) {
    EXPECT_NE(out.find("event dump_failed"), std::string::npos) << out;
    EXPECT_NE(out.find(why), std::string::npos) << out;
    EXPECT_NE(out.find("step     59"), std::string::npos) << "training stopped: " << out;
    EXPECT_NE(out.find("demo exit 0"), std::string::npos) << out;
    EXPECT_NE(out.find("entries: []"), std::string::npos) << "a partial dump was left: " << out;
  };
  // The dump (4.4 MB) does not fit in 1 MiB: not started, even with no reserve.
  expect_refused(demo_in_namespace(mount_point, "1m", "true", "0"), "do not fit in the");
  // It fits in 16 MiB, but would leave less than the default reserve (2 GiB) free.
  expect_refused(demo_in_namespace(mount_point, "16m", "true", "2147483648"), "dump_min_free_bytes");
  // It fits, with no reserve asked for, but the filesystem is read-only.
  expect_refused(demo_in_namespace(mount_point, "16m", "mount -o remount,ro " + mount_point.string(), "0"),
                 "Read-only file system");
}

std::string demo_with_spike(bool policy_on) {
  std::vector<std::string> argv{KEEL_DEMO_PATH, "--steps", "160", "--log-every", "0", "--endpoint", "",
                                "--inject-spike", "150:100", "--no-dump-nonfinite"};
  if (policy_on) argv.push_back("--skip-spikes");
  ChildProcess demo(argv);
  return run_to_end(demo, 150);
}

TEST(DumpE2E, AnInjectedSpikeIsSkippedWithThePolicyOnAndAppliedWithItOff) {
  const std::string on = demo_with_spike(true);
  EXPECT_NE(on.find("step 150 event spike"), std::string::npos) << on;
  EXPECT_NE(on.find("step 150 event skip : update skipped: spike"), std::string::npos) << on;
  EXPECT_EQ(count_of(on, "event skip"), 1) << on;

  const std::string off = demo_with_spike(false);
  EXPECT_NE(off.find("step 150 event spike"), std::string::npos) << off;
  EXPECT_NE(off.find("policy skip_spike off: update applied"), std::string::npos) << off;
  EXPECT_EQ(count_of(off, "event skip"), 0) << off;
}

TEST(DumpE2E, AnInjectedNanDumpsExactlyOnce) {
  const fs::path dumps = fresh_dir("dump-nan");
  // The dump's event is raised at the first step after the writer finished: 180 steps after
  // the NaN leave it seconds even on a fast CPU beside slow fsyncs.
  ChildProcess demo({KEEL_DEMO_PATH, "--steps", "200", "--log-every", "0", "--endpoint", "", "--inject-nan",
                     "20:blocks.1.mlp.fc.weight", "--dump-dir", dumps.string()});
  const std::string out = run_to_end(demo, 120);
  EXPECT_EQ(count_of(out, "event dump "), 1) << out;
  EXPECT_EQ(count_of(out, "event dump_failed"), 0) << out;
  EXPECT_EQ(entries(dumps), std::vector<std::string>{"step-20-nonfinite"}) << out;
}

}  // namespace
