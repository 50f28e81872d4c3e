// The job's grad norm of a sharded job: each step's sqrt(sum of the ranks' grad_norm^2), stored
// once every rank has sent that step, through Model::ingest as the dashboard receives records
// (any order across ranks); nothing for a job that is not sharded; a non-finite rank makes the
// step's value non-finite; a job started again starts its series again; ranks read from their
// recordings (Model::adopt_runs) are combined over the steps each holds exactly.
#include "model/model.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

namespace keel::app {
namespace {

wire::RunDescription description(int32_t rank, int32_t world_size, bool sharded) {
  wire::RunDescription d;
  d.run_id = "host-" + std::to_string(100 + rank) + "-1";   // a run_id of each rank's own
  d.rank = rank;
  d.world_size = world_size;
  d.sharded = sharded;
  d.start_unix_ms = 1;
  d.layers.push_back({"0.weight", {2}, 2, "float32"});
  return d;
}

wire::StepRecord record(int32_t rank, int64_t step, double grad_norm) {
  wire::StepRecord r;
  r.run = "host-" + std::to_string(100 + rank) + "-1";
  r.rank = rank;
  r.step = step;
  r.grad_norm = grad_norm;
  r.layer_count = 1;
  r.metric_mask = 1;   // grad_norm
  r.layer_values = {static_cast<float>(grad_norm)};
  return r;
}

// The shard norms of rank r at step s: 3 and 4 at step 0 (the job's 5), then growing.
double shard_norm(int32_t rank, int64_t step) { return (rank == 0 ? 3.0 : 4.0) * double(step + 1); }

TEST(JobGradNorm, IsTheRanksShardNormsCombinedOnceEveryRankSentTheStep) {
  Model model;
  for (int32_t r = 0; r < 2; ++r) model.ingest(description(r, 2, true));
  EXPECT_EQ(model.job_grad_norm(), nullptr);
  // Rank 0 runs two steps ahead of rank 1, as ranks' records arrive.
  model.ingest(record(0, 0, shard_norm(0, 0)));
  model.ingest(record(0, 1, shard_norm(0, 1)));
  EXPECT_EQ(model.job_grad_norm(), nullptr) << "no step has been heard from rank 1";
  model.ingest(record(1, 0, shard_norm(1, 0)));
  model.ingest(record(0, 2, shard_norm(0, 2)));
  model.ingest(record(1, 1, shard_norm(1, 1)));
  model.ingest(record(1, 2, shard_norm(1, 2)));
  const SeriesHistory* job = model.job_grad_norm();
  ASSERT_NE(job, nullptr);
  EXPECT_EQ(model.job_world_size(), 2);
  for (int64_t s = 0; s <= 2; ++s) {
    float value = 0;
    ASSERT_TRUE(job->value_at(s, &value)) << "step " << s;
    EXPECT_FLOAT_EQ(value, 5.0f * float(s + 1)) << "step " << s;
  }
  EXPECT_EQ(job->last_step(), 2);
  // Each rank's own chart keeps its shard's norm.
  float own = 0;
  ASSERT_TRUE(model.current_run(1)->global_series(GlobalSeries::kGradNorm).value_at(2, &own));
  EXPECT_FLOAT_EQ(own, 12.0f);
}

TEST(JobGradNorm, ANonfiniteShardMakesTheJobsStepNonfinite) {
  Model model;
  for (int32_t r = 0; r < 2; ++r) model.ingest(description(r, 2, true));
  model.ingest(record(0, 0, 3.0));
  model.ingest(record(1, 0, std::numeric_limits<double>::quiet_NaN()));
  model.ingest(record(0, 1, std::numeric_limits<double>::infinity()));
  model.ingest(record(1, 1, 4.0));
  const SeriesHistory* job = model.job_grad_norm();
  ASSERT_NE(job, nullptr);
  float value = 0;
  ASSERT_TRUE(job->value_at(0, &value));
  EXPECT_TRUE(std::isnan(value));
  ASSERT_TRUE(job->value_at(1, &value));
  EXPECT_TRUE(std::isinf(value));
}

TEST(JobGradNorm, NothingIsCombinedForAJobThatIsNotSharded) {
  // Data parallelism: every rank measures the same whole gradients, and their sum would double
  // the job's norm.
  Model model;
  for (int32_t r = 0; r < 2; ++r) model.ingest(description(r, 2, false));
  for (int64_t s = 0; s < 3; ++s) {
    for (int32_t r = 0; r < 2; ++r) model.ingest(record(r, s, 2.0));
  }
  EXPECT_EQ(model.job_grad_norm(), nullptr);
}

TEST(JobGradNorm, ADuplicateRecordIsNotCountedTwice) {
  // A history reply resends records a run already stored: its run refuses them, and the job's
  // norm must not count a rank twice (which would also complete a step rank 1 never sent).
  Model model;
  for (int32_t r = 0; r < 2; ++r) model.ingest(description(r, 2, true));
  model.ingest(record(0, 0, 3.0));
  model.ingest(record(0, 0, 3.0));
  EXPECT_EQ(model.job_grad_norm(), nullptr);
  model.ingest(record(1, 0, 4.0));
  float value = 0;
  ASSERT_NE(model.job_grad_norm(), nullptr);
  ASSERT_TRUE(model.job_grad_norm()->value_at(0, &value));
  EXPECT_FLOAT_EQ(value, 5.0f);
}

TEST(JobGradNorm, ABackfillOfOneRankAfterTheOtherIsCombinedAtEveryStep) {
  // A dashboard attached mid-run is sent each rank's history whole, rank 0's before rank 1's:
  // every step's rank 0 norm waits in its run's series until rank 1's arrives.
  Model model;
  for (int32_t r = 0; r < 2; ++r) model.ingest(description(r, 2, true));
  constexpr int64_t kSteps = 1000;
  for (int32_t r = 0; r < 2; ++r) {
    for (int64_t s = 0; s < kSteps; ++s) model.ingest(record(r, s, shard_norm(r, s)));
  }
  const SeriesHistory* job = model.job_grad_norm();
  ASSERT_NE(job, nullptr);
  for (int64_t s = 0; s < kSteps; ++s) {
    float value = 0;
    ASSERT_TRUE(job->value_at(s, &value)) << "step " << s;
    EXPECT_FLOAT_EQ(value, 5.0f * float(s + 1)) << "step " << s;
  }
}

TEST(JobGradNorm, ARankOfAnotherWorldSizeIsNotCombined) {
  // Rank 1's current run is of another job (another world_size): rank 0's steps are never
  // completed with its norms.
  Model model;
  model.ingest(description(0, 2, true));
  model.ingest(description(1, 3, true));
  for (int32_t r = 0; r < 2; ++r) model.ingest(record(r, 0, 1.0));
  EXPECT_EQ(model.job_grad_norm(), nullptr);
}

TEST(JobGradNorm, AJobStartedAgainFromACheckpointStartsItsSeriesAgain) {
  Model model;
  for (int32_t r = 0; r < 2; ++r) model.ingest(description(r, 2, true));
  for (int64_t s = 0; s < 5; ++s) {
    for (int32_t r = 0; r < 2; ++r) model.ingest(record(r, s, 1.0));
  }
  // Both ranks start again, resumed at step 2: a new start of each run (start_unix_ms).
  for (int32_t r = 0; r < 2; ++r) {
    wire::RunDescription again = description(r, 2, true);
    again.start_unix_ms = 2;
    model.ingest(again);
  }
  for (int32_t r = 0; r < 2; ++r) model.ingest(record(r, 2, shard_norm(r, 0)));
  const SeriesHistory* job = model.job_grad_norm();
  ASSERT_NE(job, nullptr);
  EXPECT_EQ(job->last_step(), 2);
  float value = 0;
  ASSERT_TRUE(job->value_at(2, &value));
  EXPECT_FLOAT_EQ(value, 5.0f) << "the resumed job's step 2, not the first start's";
}

// One rank's recording as the loader reads it: a model of its own holding steps [0, steps).
Model recording_of(int32_t rank, int64_t steps, const ModelConfig& config = {}) {
  Model file(config);
  file.ingest(description(rank, 2, true));
  for (int64_t s = 0; s < steps; ++s) file.ingest(record(rank, s, shard_norm(rank, s)));
  return file;
}

TEST(JobGradNorm, RanksOpenedFromTheirRecordingsAreCombinedOnceTheLastIsAdopted) {
  // keel --open rank0.keelrec rank1.keelrec: each file is read into a model of its own and
  // adopted in turn; no record of either ever passes through ingest() here.
  Model app;
  ASSERT_EQ(app.adopt_runs(recording_of(0, 300)), 1u);
  EXPECT_EQ(app.job_grad_norm(), nullptr) << "rank 1 is not open yet";
  ASSERT_EQ(app.adopt_runs(recording_of(1, 300)), 1u);
  const SeriesHistory* job = app.job_grad_norm();
  ASSERT_NE(job, nullptr);
  EXPECT_EQ(app.job_world_size(), 2);
  EXPECT_EQ(job->origin_step(), 0);
  EXPECT_EQ(job->last_step(), 299);
  for (int64_t s = 0; s < 300; ++s) {
    float value = 0;
    ASSERT_TRUE(job->value_at(s, &value)) << "step " << s;
    EXPECT_FLOAT_EQ(value, 5.0f * float(s + 1)) << "step " << s;
  }
}

TEST(JobGradNorm, ARecordingLongerThanTheRecentWindowIsCombinedOverItsLastSteps) {
  // Older steps are min/max buckets in each rank's series: only the recent window's raw values
  // can be squared and summed.
  ModelConfig config;
  config.recent_steps = 64;
  Model app(config);
  app.adopt_runs(recording_of(0, 1000, config));
  app.adopt_runs(recording_of(1, 1000, config));
  const SeriesHistory* job = app.job_grad_norm();
  ASSERT_NE(job, nullptr);
  EXPECT_EQ(job->origin_step(), 1000 - 64);
  EXPECT_EQ(job->last_step(), 999);
  float value = 0;
  ASSERT_TRUE(job->value_at(999, &value));
  EXPECT_FLOAT_EQ(value, 5000.0f);
}

TEST(JobGradNorm, ALiveJobsSeriesIsKeptAndExtendedWhenItsRanksRecordingsAreAdopted) {
  // The dashboard heard the job live up to step 49, then lost it; the job went on to step 99.
  // Its recordings, read back, give each rank its steps up to 99: the job's norm, combined live
  // from step 0, reaches further back than a recombination over the recent window (16 steps
  // here) could, so it is kept, and goes on from step 50 once every rank's recording is in.
  ModelConfig config;
  config.recent_steps = 16;
  Model app(config);
  for (int32_t r = 0; r < 2; ++r) app.ingest(description(r, 2, true));
  for (int64_t s = 0; s < 50; ++s) {
    for (int32_t r = 0; r < 2; ++r) app.ingest(record(r, s, shard_norm(r, s)));
  }
  ASSERT_NE(app.job_grad_norm(), nullptr);
  ASSERT_EQ(app.job_grad_norm()->origin_step(), 0);
  ASSERT_EQ(app.adopt_runs(recording_of(0, 100, config)), 1u);
  ASSERT_NE(app.job_grad_norm(), nullptr);
  EXPECT_EQ(app.job_grad_norm()->origin_step(), 0);
  EXPECT_EQ(app.job_grad_norm()->last_step(), 49) << "rank 1 has sent nothing past step 49 yet";
  ASSERT_EQ(app.adopt_runs(recording_of(1, 100, config)), 1u);
  const SeriesHistory* job = app.job_grad_norm();
  ASSERT_NE(job, nullptr);
  EXPECT_EQ(job->origin_step(), 0);
  EXPECT_EQ(job->last_step(), 99);
  for (int64_t s = 100 - 16; s < 100; ++s) {
    float value = 0;
    ASSERT_TRUE(job->value_at(s, &value)) << "step " << s;
    EXPECT_FLOAT_EQ(value, 5.0f * float(s + 1)) << "step " << s;
  }
}

TEST(JobGradNorm, RecordingsOfAJobThatIsNotShardedAreNotCombined) {
  Model app;
  for (int32_t r = 0; r < 2; ++r) {
    Model file;
    file.ingest(description(r, 2, false));
    for (int64_t s = 0; s < 10; ++s) file.ingest(record(r, s, 2.0));
    app.adopt_runs(std::move(file));
  }
  EXPECT_EQ(app.job_grad_norm(), nullptr);
}

}  // namespace
}  // namespace keel::app
