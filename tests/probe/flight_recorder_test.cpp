// The flight recorder alone (no torch): what it is handed reaches the file in order; past its
// bound it thins older steps and keeps every description, event, step near an event and the
// newest steps; a queue it cannot empty, or a full disk, loses records counted, never blocks.
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <sys/resource.h>
#include <unistd.h>

#include "keel/wire/codec.hpp"
#include "keel/wire/recording_reader.hpp"
#include "record/flight_recorder.hpp"
#include "record/recording_path.hpp"

namespace keel::probe {
namespace {

std::string temp_path(const std::string& name) {
  std::string path = ::testing::TempDir() + "keel-flight-" + std::to_string(::getpid()) + "-" + name;
  std::remove(path.c_str());
  std::remove((path + ".thinning").c_str());
  return path;
}

wire::StepRecord step_record(int64_t step, uint32_t layers) {
  wire::StepRecord r;
  r.run = "r";
  r.step = step;
  r.loss = 2.0 / (1 + step);
  r.layer_count = layers;
  r.layer_values.resize(static_cast<size_t>(layers) * wire::kLayerMetricCount);
  for (size_t i = 0; i < r.layer_values.size(); ++i) {
    r.layer_values[i] = static_cast<float>(1e-3 * static_cast<double>((step * 7919 + static_cast<int64_t>(i) * 104729) % 100003));
  }
  return r;
}

wire::Event event_at(int64_t step) {
  wire::Event e;
  e.run = "r";
  e.step = step;
  e.kind = "first_nonfinite";
  e.layer = "blocks.0.w";
  e.detail = "non-finite gradient";
  return e;
}

template <class T>
void hand_over(FlightRecorder& recorder, const T& message) {
  recorder.record(message, std::make_shared<const std::vector<char>>(wire::encode(message)));
}

struct Read {
  std::vector<int64_t> steps;
  std::vector<int64_t> events;
  size_t descriptions = 0;
  std::vector<std::string> warnings;
};

Read read_back(const std::string& path) {
  Read out;
  std::string error;
  auto reader = wire::RecordingReader::open(path, error);
  EXPECT_TRUE(reader) << error;
  if (!reader) return out;
  out.warnings = reader->warnings();
  reader->read_all([&](const wire::RecordingFrame& f) {
    const wire::DecodeResult d = wire::decode(f.data, f.size);
    ASSERT_TRUE(d.ok) << d.error;
    if (const auto* s = std::get_if<wire::StepRecord>(&d.message)) {
      EXPECT_EQ(s->step, f.step);
      out.steps.push_back(s->step);
    } else if (const auto* e = std::get_if<wire::Event>(&d.message)) {
      out.events.push_back(e->step);
    } else if (std::holds_alternative<wire::RunDescription>(d.message)) {
      ++out.descriptions;
    }
  });
  return out;
}

TEST(FlightRecorder, EveryMessageReachesTheFileInOrder) {
  const std::string path = temp_path("order");
  std::string error;
  FlightRecorderOptions options;
  options.path = path;
  {
    auto recorder = FlightRecorder::start(options, error);
    ASSERT_TRUE(recorder) << error;
    wire::RunDescription run;
    run.run_id = "r";
    hand_over(*recorder, run);
    for (int64_t s = 0; s < 500; ++s) {
      hand_over(*recorder, step_record(s, 8));
      if (s == 321) hand_over(*recorder, event_at(s));
    }
    EXPECT_EQ(recorder->path(), path);
  }
  const Read read = read_back(path);
  EXPECT_EQ(read.descriptions, 1u);
  ASSERT_EQ(read.steps.size(), 500u);
  for (int64_t s = 0; s < 500; ++s) ASSERT_EQ(read.steps[s], s);
  EXPECT_EQ(read.events, std::vector<int64_t>{321});
  EXPECT_TRUE(read.warnings.empty());
}

// A long run past the bound: the file stays within it, and what thinning may never drop is
// all there.
TEST(FlightRecorder, PastItsBoundItThinsOlderStepsAndKeepsEventsTheirNeighboursAndTheNewest) {
  const std::string path = temp_path("thin");
  std::string error;
  FlightRecorderOptions options;
  options.path = path;
  options.max_bytes = 512 << 10;
  options.recent_steps = 100;
  options.event_window = 8;
  options.writer.chunk_target_bytes = 16 << 10;
  const std::set<int64_t> event_steps = {100, 2500, 5200};
  const int64_t steps = 6000;
  uint64_t peak = 0;
  uint64_t thinned = 0;
  {
    auto recorder = FlightRecorder::start(options, error);
    ASSERT_TRUE(recorder) << error;
    wire::RunDescription run;
    run.run_id = "r";
    hand_over(*recorder, run);
    for (int64_t s = 0; s < steps; ++s) {
      hand_over(*recorder, step_record(s, 16));
      if (event_steps.count(s)) hand_over(*recorder, event_at(s));
      if (s % 10 == 0) {
        // At the pace of a fast trainer (5,000 steps a second), so the queue never overflows.
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        peak = std::max(peak, recorder->file_bytes());
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    thinned = recorder->thinned_steps();
    EXPECT_EQ(recorder->dropped(), 0u) << recorder->failure();
  }
  EXPECT_GT(thinned, 0u);
  // Between two flushes the file may pass the bound by one batch before it is thinned.
  EXPECT_LE(peak, options.max_bytes + (64 << 10));
  const Read read = read_back(path);
  EXPECT_EQ(read.descriptions, 1u);
  EXPECT_EQ(std::set<int64_t>(read.events.begin(), read.events.end()), event_steps);
  const std::set<int64_t> kept(read.steps.begin(), read.steps.end());
  EXPECT_TRUE(std::is_sorted(read.steps.begin(), read.steps.end()));
  EXPECT_EQ(kept.size(), read.steps.size());
  EXPECT_LT(kept.size(), static_cast<size_t>(steps) / 2);
  EXPECT_EQ(kept.size() + thinned, static_cast<size_t>(steps));
  for (int64_t e : event_steps) {
    for (int64_t s = e - options.event_window; s <= e + options.event_window; ++s) {
      EXPECT_TRUE(kept.count(s)) << "step " << s << " near the event at " << e;
    }
  }
  for (int64_t s = steps - options.recent_steps; s < steps; ++s) {
    ASSERT_TRUE(kept.count(s)) << "newest step " << s;
  }
  // The thinned part still spans the run: step 0, and a step in every eighth of it.
  EXPECT_TRUE(kept.count(0));
  const int64_t thinned_part = steps - options.recent_steps;
  for (int64_t k = 0; k < 8; ++k) {
    const auto first = kept.lower_bound(k * thinned_part / 8);
    EXPECT_TRUE(first != kept.end() && *first < (k + 1) * thinned_part / 8) << "eighth " << k;
  }
}

// A wide model records so much a step that its newest 4,096 steps alone would outgrow the
// bound: the steps kept whole shrink to a quarter of it, and the file stays bounded.
TEST(FlightRecorder, StepsTooLargeForTheRecentWindowAreThinnedWithinTheBound) {
  const std::string path = temp_path("wide");
  std::string error;
  FlightRecorderOptions options;
  options.path = path;
  options.max_bytes = 512 << 10;
  options.writer.chunk_target_bytes = 32 << 10;
  uint64_t peak = 0, thinned = 0;
  const int64_t steps = 600;
  {
    auto recorder = FlightRecorder::start(options, error);
    ASSERT_TRUE(recorder) << error;
    for (int64_t s = 0; s < steps; ++s) {
      hand_over(*recorder, step_record(s, 512));   // about 12 KB a step
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      peak = std::max(peak, recorder->file_bytes());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    peak = std::max(peak, recorder->file_bytes());
    thinned = recorder->thinned_steps();
    EXPECT_EQ(recorder->dropped(), 0u) << recorder->failure();
  }
  EXPECT_GT(thinned, 0u);
  EXPECT_LE(peak, options.max_bytes + (128 << 10));
  const Read read = read_back(path);
  EXPECT_EQ(read.steps.size() + thinned, static_cast<size_t>(steps));
  ASSERT_FALSE(read.steps.empty());
  EXPECT_EQ(read.steps.back(), steps - 1);
}

TEST(FlightRecorder, AQueueThatCannotBeEmptiedDropsStepRecordsCountedAndKeepsEvents) {
  const std::string path = temp_path("flood");
  std::string error;
  FlightRecorderOptions options;
  options.path = path;
  options.queue_messages = 4;
  auto recorder = FlightRecorder::start(options, error);
  ASSERT_TRUE(recorder) << error;
  // Faster than any disk: 20,000 records handed over without a pause.
  for (int64_t s = 0; s < 20000; ++s) hand_over(*recorder, step_record(s, 64));
  hand_over(*recorder, event_at(20000));
  const uint64_t dropped = recorder->dropped();
  EXPECT_GT(dropped, 0u);
  EXPECT_NE(recorder->failure().find("queue was full"), std::string::npos) << recorder->failure();
  recorder.reset();
  const Read read = read_back(path);
  EXPECT_EQ(read.steps.size() + dropped, 20000u);
  EXPECT_EQ(read.events, std::vector<int64_t>{20000});
}

TEST(FlightRecorder, AFullDiskLosesRecordsCountedAndSaysWhy) {
  const std::string path = temp_path("full");
  std::string error;
  FlightRecorderOptions options;
  options.path = path;
  auto recorder = FlightRecorder::start(options, error);
  ASSERT_TRUE(recorder) << error;
  std::signal(SIGXFSZ, SIG_IGN);
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  rlimit small = old;
  small.rlim_cur = 4096;
  // The limit is the process's: every thread, the recorder's too, meets it.
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  for (int64_t s = 0; s < 200; ++s) {
    hand_over(*recorder, step_record(s, 64));
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  ::setrlimit(RLIMIT_FSIZE, &old);
  const uint64_t dropped = recorder->dropped();
  EXPECT_GT(dropped, 0u);
  EXPECT_NE(recorder->failure().find("cannot write"), std::string::npos) << recorder->failure();
  recorder.reset();
  const Read read = read_back(path);
  EXPECT_EQ(read.steps.size() + dropped, 200u);
}

TEST(RecordingPath, NamesTheRunModelAndRankAndKeepsTheNameInItsDirectory) {
  EXPECT_EQ(recording_file_name("host-12-1700000000", "", 0, 1), "host-12-1700000000-rank0.keelrec");
  EXPECT_EQ(recording_file_name("host-12-1700000000", "critic", 3, 1), "host-12-1700000000-critic-rank3.keelrec");
  EXPECT_EQ(recording_file_name("run", "", 0, 2), "run-rank0-2.keelrec");
  EXPECT_EQ(recording_file_name("../../etc/passwd", "", 0, 1), "_._.._etc_passwd-rank0.keelrec");
  EXPECT_EQ(recording_file_name("", "", 1, 1), "run-rank1.keelrec");
  EXPECT_LE(recording_file_name(std::string(1000, 'x'), std::string(64, 'm'), 1, 1).size(), 255u);
}

}  // namespace
}  // namespace keel::probe
