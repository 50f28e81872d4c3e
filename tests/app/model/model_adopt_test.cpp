// Model::adopt_runs: runs built in another model (a recording read on the loader's thread) are
// taken over: a held run of the same identity and start is replaced when the newcomer starts
// earlier or holds as many steps, a rank streaming it streams into the newcomer, and runs of
// other identities or starts are added beside the held ones.
#include <gtest/gtest.h>

#include <string>

#include "model/model.hpp"

namespace keel::app {
namespace {

wire::RunDescription described(const std::string& run_id, int64_t start_unix_ms) {
  wire::RunDescription d;
  d.run_id = run_id;
  d.seq = 1;
  d.start_unix_ms = start_unix_ms;
  d.layers.push_back({"fc.weight", {2}, 2, "float32"});
  return d;
}

wire::StepRecord record(const std::string& run_id, int64_t at) {
  wire::StepRecord r;
  r.run = run_id;
  r.step = at;
  r.seq = static_cast<uint64_t>(at) + 2;
  r.layer_count = 1;
  r.layer_values.assign(wire::kLayerMetricCount, 1.0f);
  return r;
}

// A model holding `run_id`'s steps [first, last].
Model holding(const std::string& run_id, int64_t start_unix_ms, int64_t first, int64_t last) {
  Model model;
  model.ingest(described(run_id, start_unix_ms));
  for (int64_t s = first; s <= last; ++s) model.ingest(record(run_id, s));
  return model;
}

TEST(ModelAdopt, ALiveRunReadBackFromItsRecordingHasItsWholeHistoryAndGoesOnLive) {
  Model app = holding("night", 1000, 900, 950);   // attached late: the ring's steps only
  Model file = holding("night", 1000, 0, 940);    // the recording, read a moment ago
  EXPECT_EQ(app.adopt_runs(std::move(file)), 1u);
  ASSERT_EQ(app.run_count(), 1u);
  const RunModel& run = app.run(0);
  EXPECT_EQ(run.first_step(), 0);
  EXPECT_EQ(run.last_step(), 940);
  EXPECT_EQ(app.current_run(0), &run);
  // The live stream goes on into the adopted run.
  app.ingest(record("night", 951));
  EXPECT_EQ(app.run(0).last_step(), 951);
  EXPECT_EQ(app.find_run(wire::RunKey{"night", "", 0}), &app.run(0));
}

TEST(ModelAdopt, AFileThatHoldsLessOfARunThanTheModelIsDropped) {
  Model app = holding("night", 1000, 0, 500);
  Model dump = holding("night", 1000, 400, 480);   // a dump's telemetry: the ring at the dump
  EXPECT_EQ(app.adopt_runs(std::move(dump)), 0u);
  EXPECT_EQ(app.run(0).first_step(), 0);
  EXPECT_EQ(app.run(0).last_step(), 500);
}

TEST(ModelAdopt, TheWholeFileReplacesItsFirstPicture) {
  Model app;
  Model first_picture;
  first_picture.ingest(described("night", 1000));
  for (int64_t s = 0; s <= 100000; s += 1000) first_picture.ingest(record("night", s));
  ASSERT_EQ(app.adopt_runs(std::move(first_picture)), 1u);
  EXPECT_EQ(app.run(0).counters().steps_stored, 101u);
  ASSERT_EQ(app.adopt_runs(holding("night", 1000, 0, 100000)), 1u);
  ASSERT_EQ(app.run_count(), 1u);
  EXPECT_EQ(app.run(0).counters().steps_stored, 100001u);
}

TEST(ModelAdopt, OtherRunsAndOtherStartsAreAddedBesideTheHeldOnes) {
  Model app = holding("today", 2000, 0, 10);
  const uint64_t revision = app.revision();
  EXPECT_EQ(app.adopt_runs(holding("yesterday", 1000, 0, 10)), 1u);
  // The same run_id started again (resumed from a checkpoint): a segment of its own.
  EXPECT_EQ(app.adopt_runs(holding("today", 3000, 11, 20)), 1u);
  ASSERT_EQ(app.run_count(), 3u);
  EXPECT_GT(app.revision(), revision);
  EXPECT_EQ(app.run(1).run_id(), "yesterday");
  EXPECT_EQ(app.run(2).run_id(), "today");
  EXPECT_EQ(app.run(2).segment(), 2);
  // Rank 0 still streams the run it streamed.
  EXPECT_EQ(app.current_run(0), &app.run(0));
}

}  // namespace
}  // namespace keel::app
