// The first picture of a large recording: which chunks are read (the ends, every chunk with an
// event or description, the rest spread evenly within the budget), which step records are kept
// (one per stride, and every step an event names), and that it is read from a real file.
#include "net/first_picture.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <variant>

#include <unistd.h>

#include <gtest/gtest.h>

#include "net/recording_file.hpp"
#include "run_recording.hpp"

namespace keel::app {
namespace {

namespace fs = std::filesystem;

// `count` chunks of 100 steps and 1 MiB each; the chunks in `flagged` hold an event.
std::vector<wire::RecordingChunk> chunks_of(size_t count, const std::set<size_t>& flagged = {}) {
  std::vector<wire::RecordingChunk> chunks(count);
  for (size_t i = 0; i < count; ++i) {
    chunks[i].raw_bytes = 1u << 20;
    chunks[i].messages = 100;
    chunks[i].first_step = static_cast<int64_t>(i) * 100;
    chunks[i].last_step = static_cast<int64_t>(i) * 100 + 99;
    if (flagged.count(i)) chunks[i].flags = wire::recording::kChunkHasDescriptionOrEvent;
  }
  return chunks;
}

TEST(FirstPicture, ARecordingWithinTheBudgetIsReadWholeAtOnce) {
  FirstPictureBudget budget;
  budget.whole_raw_bytes = 8u << 20;
  const FirstPicturePlan plan = plan_first_picture(chunks_of(8), budget);
  EXPECT_TRUE(plan.whole);
  EXPECT_EQ(plan.chunks.size(), 8u);
  EXPECT_EQ(plan.stride, 1);
}

TEST(FirstPicture, ALargeOneReadsItsEndsEveryEventChunkAndTheRestSpreadEvenlyWithinTheBudget) {
  FirstPictureBudget budget;
  budget.whole_raw_bytes = 8u << 20;
  budget.max_chunks = 100;
  budget.samples = 1000;
  const std::set<size_t> flagged = {0, 17, 4000, 9998};
  const FirstPicturePlan plan = plan_first_picture(chunks_of(10000, flagged), budget);
  ASSERT_FALSE(plan.whole);
  EXPECT_LE(plan.chunks.size(), 100u);
  EXPECT_GE(plan.chunks.size(), 95u);
  EXPECT_TRUE(std::is_sorted(plan.chunks.begin(), plan.chunks.end()));
  EXPECT_EQ(std::adjacent_find(plan.chunks.begin(), plan.chunks.end()), plan.chunks.end()) << "a chunk twice";
  const std::set<size_t> read(plan.chunks.begin(), plan.chunks.end());
  for (size_t must : {size_t{0}, size_t{17}, size_t{4000}, size_t{9998}, size_t{9999}}) {
    EXPECT_EQ(read.count(must), 1u) << "chunk " << must << " is not read";
  }
  // Spread: no stretch of the run without a chunk read is much longer than an even share.
  size_t widest_gap = 0;
  for (size_t i = 1; i < plan.chunks.size(); ++i) widest_gap = std::max(widest_gap, plan.chunks[i] - plan.chunks[i - 1]);
  EXPECT_LE(widest_gap, 2 * 10000 / 95);
  // 1,000,000 steps in about 1,000 samples.
  EXPECT_EQ(plan.first_step, 0);
  EXPECT_EQ(plan.stride, 1000);
}

TEST(FirstPicture, ChunksWithEventsBeyondTheBudgetAreSpreadTooAndTheBudgetHolds) {
  FirstPictureBudget budget;
  budget.whole_raw_bytes = 0;
  budget.max_chunks = 50;
  std::set<size_t> flagged;
  for (size_t i = 0; i < 1000; i += 2) flagged.insert(i);   // an event storm: every other chunk
  const FirstPicturePlan plan = plan_first_picture(chunks_of(1000, flagged), budget);
  ASSERT_FALSE(plan.whole);
  EXPECT_LE(plan.chunks.size(), 50u);
  EXPECT_EQ(plan.chunks.front(), 0u);
  EXPECT_EQ(plan.chunks.back(), 999u);
}

TEST(FirstPicture, TheSamplerKeepsTheFirstRecordAtOrAfterEachSamplePoint) {
  FirstPicturePlan plan;
  plan.first_step = 10;
  plan.stride = 5;
  StepSampler sampler(plan);
  std::vector<int64_t> kept;
  for (int64_t step : {10, 11, 14, 15, 16, 23, 24, 25, 26, 40}) {
    if (sampler.take(step)) kept.push_back(step);
  }
  EXPECT_EQ(kept, (std::vector<int64_t>{10, 15, 23, 25, 40}));
}

// A real file: 20,000 steps in about 700 chunks, an event at three steps (one a NaN).
TEST(FirstPicture, FromARealFileItKeepsEveryEventTheirStepsTheEndsAndAboutTheSamplesAsked) {
  const fs::path path = fs::temp_directory_path() / ("keel-first-picture-" + std::to_string(::getpid()) + ".keelrec");
  fs::remove(path);
  test_support::RunSpec spec;
  spec.event_steps = {3, 12345, 19990};
  spec.nan_step = 12345;
  test_support::write_run_recording(path.string(), 19999, spec);
  std::string error;
  const std::unique_ptr<RecordingFile> file = RecordingFile::open(path.string(), error);
  ASSERT_TRUE(file) << error;
  ASSERT_GT(file->chunks().size(), 300u);

  FirstPictureBudget budget;
  budget.whole_raw_bytes = 0;
  budget.max_chunks = 200;
  budget.samples = 500;
  const FirstPicturePlan plan = plan_first_picture(file->chunks(), budget);
  ASSERT_FALSE(plan.whole);
  std::vector<int64_t> steps;
  std::vector<int64_t> events;
  int descriptions = 0;
  RecordingFileReport report;
  file->read_first_picture(plan, [&](wire::Message& m) {
    if (const auto* record = std::get_if<wire::StepRecord>(&m)) steps.push_back(record->step);
    if (const auto* event = std::get_if<wire::Event>(&m)) events.push_back(event->step);
    descriptions += std::holds_alternative<wire::RunDescription>(m);
    return true;
  }, report);
  fs::remove(path);

  EXPECT_EQ(descriptions, 1);
  EXPECT_EQ(events, spec.event_steps);
  EXPECT_TRUE(std::is_sorted(steps.begin(), steps.end()));
  for (int64_t step : {int64_t{0}, int64_t{3}, int64_t{12345}, int64_t{19990}}) {
    EXPECT_TRUE(std::binary_search(steps.begin(), steps.end(), step)) << "step " << step << " is not kept";
  }
  EXPECT_GE(steps.back(), 19999 - 2 * plan.stride) << "the run's end is not in the picture";
  // One per stride where a chunk was read: at most the samples asked (and the event steps).
  EXPECT_LE(steps.size(), 500u + 3u);
  EXPECT_GE(steps.size(), 150u);
  EXPECT_TRUE(report.problems.empty());
}

}  // namespace
}  // namespace keel::app
