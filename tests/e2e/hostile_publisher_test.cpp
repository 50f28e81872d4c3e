// A publisher that speaks valid protocol but sends what no probe would, against the real
// dashboard in an X server: its memory stays within its budget, and what is beyond sane limits
// is refused and counted, never drawn. The cases of issue 30, which took the dashboard to
// 9.1 GB and 8.1 GB before it had a budget: 3,000 events with a 60 KB detail each, a
// 200,000-layer description with records, and ranks outside the job.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "child_process.hpp"
#include "test_publisher.hpp"

namespace {

using keel::app::test_support::ServerAuth;
using keel::app::test_support::TestPublisher;
using keel::e2e::ChildProcess;
namespace wire = keel::wire;

// The dashboard's default memory budget (docs/watching.md, "--memory-budget").
constexpr long kBudgetKb = 1L << 20;

// A /proc/PID/status field in kB (VmRSS, VmHWM); -1 when the process is gone.
long status_kb(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, field.size() + 1, field + ":") == 0) return std::atol(line.c_str() + field.size() + 1);
  }
  return -1;
}

wire::RunDescription hostile_run(size_t layers) {
  wire::RunDescription run;
  run.run_id = "hostile";
  run.seq = 1;
  run.world_size = 1;
  run.start_unix_ms = 1795000000000;
  run.layers.reserve(layers);
  for (size_t i = 0; i < layers; ++i) run.layers.push_back({"l" + std::to_string(i) + ".weight", {4}, 4, "float32"});
  return run;
}

wire::StepRecord record_of(const wire::RunDescription& run, int64_t step) {
  wire::StepRecord record;
  record.run = run.run_id;
  record.seq = static_cast<uint64_t>(step) + 2;
  record.step = step;
  record.layer_count = static_cast<uint32_t>(run.layers.size());
  record.layer_values.assign(run.layers.size() * wire::kLayerMetricCount, 1.0f);
  return record;
}

// Sends `send(i)` for i in [0, count) in bursts a subscriber can take (a PUB socket drops past
// its high-water mark), then watches the dashboard for `settle_secs`; returns its peak RSS.
template <typename Send>
long peak_kb_while(ChildProcess& keel, int count, int burst, double settle_secs, Send send) {
  long peak = 0;
  for (int i = 0; i < count; ++i) {
    send(i);
    if (i % burst == burst - 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      peak = std::max(peak, status_kb(keel.pid(), "VmRSS"));
      if (peak > 2 * kBudgetKb) return peak;   // failed already: spare the machine
    }
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(settle_secs);
  while (std::chrono::steady_clock::now() < until) {
    peak = std::max(peak, status_kb(keel.pid(), "VmRSS"));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return std::max(peak, status_kb(keel.pid(), "VmHWM"));
}

TEST(HostilePublisher, ThreeThousandEventsOfSixtyKilobytesStayWithinTheBudget) {
  TestPublisher publisher(ServerAuth::kUsersOwnKey);
  ChildProcess keel({KEEL_PATH, "--verbose", "--connect", publisher.endpoint()});
  const wire::RunDescription run = hostile_run(2);
  // Until the dashboard shows the run: its subscription is live.
  for (int64_t step = 0; keel.wait_for("keel: shown", 0.1).empty(); ++step) {
    ASSERT_LT(step, 600) << keel.output();
    publisher.send(run);
    publisher.send(record_of(run, step));
  }
  const std::string detail(60000, 'x');
  const long peak = peak_kb_while(keel, 3000, 20, 5.0, [&](int i) {
    wire::Event event;
    event.run = run.run_id;
    event.seq = 100000 + static_cast<uint64_t>(i);
    event.step = 1000 + i;
    // Of layers and kinds that differ, so the events pane cannot fold them into one row.
    event.kind = i % 3 == 0 ? "spike" : i % 3 == 1 ? "skip" : "dump_failed";
    event.layer = "l" + std::to_string(i % 2) + ".weight";
    event.detail = std::to_string(i) + detail;
    publisher.send(event);
  });
  std::printf("dashboard peak RSS %ld MB after 3,000 x 60 KB events\n", peak / 1024);
  EXPECT_LE(peak, kBudgetKb) << keel.output().substr(0, 4000);
  EXPECT_TRUE(keel.alive());
}

TEST(HostilePublisher, ATwoHundredThousandLayerDescriptionIsRefusedAndCountedAndFramesGoOn) {
  TestPublisher publisher(ServerAuth::kUsersOwnKey);
  ChildProcess keel({KEEL_PATH, "--verbose", "--connect", publisher.endpoint()});
  const wire::RunDescription huge = hostile_run(200000);
  const wire::RunDescription small = hostile_run(2);
  for (int64_t step = 0; keel.wait_for("keel: shown", 0.1).empty(); ++step) {
    ASSERT_LT(step, 600) << keel.output();
    publisher.send(small);
    publisher.send(record_of(small, step));
  }
  const long peak = peak_kb_while(keel, 60, 1, 5.0, [&](int i) {
    if (i % 20 == 0) publisher.send(huge);
    publisher.send(record_of(huge, 10000 + i));
  });
  std::printf("dashboard peak RSS %ld MB after a 200,000-layer description and 60 records\n", peak / 1024);
  EXPECT_LE(peak, kBudgetKb);
  const std::string refused = keel.find_or_wait_for("keel: refused", 10);
  EXPECT_NE(refused.find("200000 layers, more than the 100000 the dashboard takes"), std::string::npos)
      << keel.output().substr(0, 4000);
  EXPECT_TRUE(keel.alive());
}

}  // namespace
