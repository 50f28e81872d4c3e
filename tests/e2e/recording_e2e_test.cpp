// The flight recorder through the real binaries: keel-demo killed with SIGKILL at random
// moments leaves a recording that opens every time, its steps whole and in order up to about
// where it died; `keel-cli record` records a probe from outside and `keel-cli summary` reads it.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "child_process.hpp"
#include "keel/wire/codec.hpp"
#include "keel/wire/recording_reader.hpp"

namespace {

namespace fs = std::filesystem;
using keel::e2e::ChildProcess;

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("keel-e2e-recording-" + std::to_string(::getpid())) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

struct Opened {
  bool ok = false;
  std::string error;
  std::vector<int64_t> steps;
  size_t descriptions = 0;
  size_t undecodable = 0;
};

Opened open_recording(const fs::path& path) {
  Opened out;
  auto reader = keel::wire::RecordingReader::open(path.string(), out.error);
  if (!reader) return out;
  std::vector<std::string> errors;
  reader->read_all(
      [&](const keel::wire::RecordingFrame& f) {
        const keel::wire::DecodeResult d = keel::wire::decode(f.data, f.size);
        if (!d.ok) {
          ++out.undecodable;
          return;
        }
        if (const auto* s = std::get_if<keel::wire::StepRecord>(&d.message)) out.steps.push_back(s->step);
        if (std::holds_alternative<keel::wire::RunDescription>(d.message)) ++out.descriptions;
      },
      &errors);
  out.ok = errors.empty();
  if (!errors.empty()) out.error = errors.front();
  return out;
}

// Issue 29's target: killed mid-write 20 times, every file opens, losing only the records
// still on their way to the disk (the publisher's and recorder's queues, a few steps).
TEST(RecordingE2e, KeelDemoKilledTwentyTimesLeavesAFileThatOpensEveryTime) {
  std::mt19937 random(29);
  int64_t worst_lag = 0;
  for (int round = 0; round < 20; ++round) {
    const fs::path dir = fresh_dir("kill-" + std::to_string(round));
    ChildProcess demo({KEEL_DEMO_PATH, "--steps", "0", "--endpoint", "", "--log-every", "1", "--record-dir",
                       (dir / "runs").string(), "--no-dump-nonfinite"});
    // Past the first steps, then a random moment within the next few steps.
    ASSERT_FALSE(demo.wait_for("step      3 ", 120).empty()) << demo.output();
    std::this_thread::sleep_for(std::chrono::milliseconds(random() % 150));
    demo.kill_now();
    // The last step the demo printed before it died (its line is printed after the step).
    int64_t printed = 3;
    for (size_t at = demo.output().find("step "); at != std::string::npos; at = demo.output().find("\nstep ", at + 1)) {
      const size_t digits = demo.output().find_first_of("0123456789", at);
      printed = std::max<int64_t>(printed, std::stoll(demo.output().substr(digits, 12)));
    }
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(dir / "runs")) files.push_back(entry.path());
    ASSERT_EQ(files.size(), 1u) << "round " << round;
    const Opened opened = open_recording(files[0]);
    ASSERT_TRUE(opened.ok) << "round " << round << ": " << opened.error;
    EXPECT_EQ(opened.undecodable, 0u) << "round " << round;
    EXPECT_GE(opened.descriptions, 1u) << "round " << round;
    ASSERT_FALSE(opened.steps.empty()) << "round " << round;
    for (size_t i = 0; i < opened.steps.size(); ++i) {
      ASSERT_EQ(opened.steps[i], static_cast<int64_t>(i)) << "round " << round << ": steps whole and in order";
    }
    worst_lag = std::max(worst_lag, printed - opened.steps.back());
  }
  // What the queues held when the process died: a few steps at most (the recorder flushes
  // every batch; the publisher drains every 2 ms).
  std::printf("recording e2e: at most %lld step(s) between the last printed and the last recorded\n",
              static_cast<long long>(worst_lag));
  EXPECT_LE(worst_lag, 5);
}

TEST(RecordingE2e, KeelCliRecordsAProbeFromOutsideAndSummarisesTheFile) {
  const fs::path dir = fresh_dir("cli-record");
  const int port = keel::e2e::free_port_pair();
  ASSERT_GT(port, 0);
  const std::string endpoint = "tcp://127.0.0.1:" + std::to_string(port);
  const fs::path file = dir / "outside.keelrec";
  ChildProcess record({KEEL_CLI_PATH, "record", "--endpoint", endpoint, "--no-auth", "--out", file.string(),
                       "--timeout", "60"});
  ChildProcess demo({KEEL_DEMO_PATH, "--steps", "80", "--pace", "40", "--endpoint", endpoint, "--log-every", "0",
                     "--allow-unauthenticated-local", "--record-dir", "", "--inject-nan", "50:blocks.0.mlp.fc.weight",
                     "--no-dump-nonfinite"});
  EXPECT_EQ(demo.wait_exit(), 0) << demo.output();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  record.stop();   // SIGTERM: keel-cli closes the file and says what it wrote
  EXPECT_FALSE(record.wait_for("keel-cli: recorded", 10).empty()) << record.output();

  const Opened opened = open_recording(file);
  ASSERT_TRUE(opened.ok) << opened.error;
  ASSERT_FALSE(opened.steps.empty());
  EXPECT_EQ(opened.steps.back(), 79);

  ChildProcess summary({KEEL_CLI_PATH, "summary", file.string()});
  EXPECT_EQ(summary.wait_exit(), 0);
  summary.wait_for("no such line", 1);
  EXPECT_NE(summary.output().find("first non-finite  step 50 in blocks.0.mlp.fc.weight"), std::string::npos)
      << summary.output();
  EXPECT_NE(summary.output().find("skips    1 (nonfinite 1)"), std::string::npos) << summary.output();
}

}  // namespace
