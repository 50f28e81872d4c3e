// A sharded job's grad norm per layer: each layer's sqrt(sum of the ranks' grad_norm^2) at every
// step all ranks sent per-layer values of, through Model::ingest (any order across ranks) and
// Model::adopt_runs (ranks read from their recordings); none at a step sent as module rollups,
// none for ranks whose layers differ, and a rank's non-finite layer makes that layer's value
// non-finite alone.
#include "model/model.hpp"
#include "model/rank_overview.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace keel::app {
namespace {

constexpr size_t kLayers = 3;

std::string layer_name(size_t layer, const std::string& prefix = "") {
  return prefix + "blocks." + std::to_string(layer) + ".weight";
}

wire::RunDescription description(int32_t rank, const std::string& prefix = "") {
  wire::RunDescription d;
  d.run_id = "host-" + std::to_string(100 + rank) + "-1";
  d.rank = rank;
  d.world_size = 2;
  d.sharded = true;
  d.start_unix_ms = 1;
  for (size_t l = 0; l < kLayers; ++l) d.layers.push_back({layer_name(l, prefix), {4}, 4, "float32"});
  d.modules.push_back({"blocks", 0, uint32_t(kLayers)});
  return d;
}

// Rank r's shard norm of layer l at step s: rank 0's and rank 1's are 3 and 4 times (l + 1)
// (s + 1), so the job's is 5 (l + 1) (s + 1).
float shard_norm(int32_t rank, size_t layer, int64_t step) {
  return (rank == 0 ? 3.0f : 4.0f) * float(layer + 1) * float(step + 1);
}

wire::StepRecord record(int32_t rank, int64_t step) {
  wire::StepRecord r;
  r.run = "host-" + std::to_string(100 + rank) + "-1";
  r.rank = rank;
  r.step = step;
  r.layer_count = kLayers;
  r.metric_mask = 1;   // grad_norm
  double sumsq = 0;
  for (size_t l = 0; l < kLayers; ++l) {
    r.layer_values.push_back(shard_norm(rank, l, step));
    sumsq += double(shard_norm(rank, l, step)) * shard_norm(rank, l, step);
  }
  r.grad_norm = std::sqrt(sumsq);
  return r;
}

// The same step sent as the module's rollup (its worst layer), with no per-layer values.
wire::StepRecord rollup(int32_t rank, int64_t step) {
  wire::StepRecord r = record(rank, step);
  r.metric_mask = 0;
  r.layer_values.clear();
  r.module_mask = 1;
  r.module_count = 1;
  r.module_values = {shard_norm(rank, kLayers - 1, step)};
  return r;
}

void expect_job_layers(const JobLayerNorms& job, int64_t first, int64_t last) {
  ASSERT_EQ(job.layer_count(), kLayers);
  for (size_t l = 0; l < kLayers; ++l) {
    for (int64_t s = first; s <= last; ++s) {
      float value = 0;
      ASSERT_TRUE(job.layer(l).value_at(s, &value)) << "layer " << l << " step " << s;
      EXPECT_FLOAT_EQ(value, 5.0f * float(l + 1) * float(s + 1)) << "layer " << l << " step " << s;
    }
  }
}

TEST(JobLayerNorms, AreEachLayersShardNormsCombinedOnceEveryRankSentTheStep) {
  Model model;
  for (int32_t r = 0; r < 2; ++r) model.ingest(description(r));
  model.ingest(record(0, 0));
  model.ingest(record(0, 1));
  EXPECT_EQ(model.job_layer_norms().layer_count(), 0u) << "rank 1 has sent nothing yet";
  model.ingest(record(1, 0));
  model.ingest(record(1, 1));
  EXPECT_EQ(model.job_layer_norms().world_size(), 2);
  expect_job_layers(model.job_layer_norms(), 0, 1);
  // Each rank's own rows keep its shards' norms.
  float own = 0;
  ASSERT_TRUE(model.current_run(1)->layer_series(2, wire::LayerMetric::kGradNorm).value_at(1, &own));
  EXPECT_FLOAT_EQ(own, 24.0f);
}

TEST(JobLayerNorms, AStepSentAsModuleRollupsHasNoLayerValuesButTheJobsNorm) {
  Model model;
  for (int32_t r = 0; r < 2; ++r) model.ingest(description(r));
  for (int32_t r = 0; r < 2; ++r) model.ingest(record(r, 0));
  for (int32_t r = 0; r < 2; ++r) model.ingest(rollup(r, 1));
  for (int32_t r = 0; r < 2; ++r) model.ingest(record(r, 2));
  const JobLayerNorms& job = model.job_layer_norms();
  ASSERT_EQ(job.layer_count(), kLayers);
  float value = 0;
  EXPECT_FALSE(job.layer(0).value_at(1, &value)) << "a module's worst layer is no layer's norm";
  ASSERT_TRUE(job.layer(0).value_at(2, &value));
  EXPECT_FLOAT_EQ(value, 15.0f);
  ASSERT_NE(model.job_grad_norm(), nullptr);
  EXPECT_TRUE(model.job_grad_norm()->value_at(1, &value)) << "the job's norm is combined at every step";
}

TEST(JobLayerNorms, ANonfiniteLayerOfOneRankMakesThatLayerOfTheJobNonfinite) {
  Model model;
  for (int32_t r = 0; r < 2; ++r) model.ingest(description(r));
  wire::StepRecord poisoned = record(1, 0);
  poisoned.layer_values[1] = std::numeric_limits<float>::quiet_NaN();
  model.ingest(record(0, 0));
  model.ingest(poisoned);
  const JobLayerNorms& job = model.job_layer_norms();
  ASSERT_EQ(job.layer_count(), kLayers);
  float value = 0;
  ASSERT_TRUE(job.layer(1).value_at(0, &value));
  EXPECT_TRUE(std::isnan(value));
  ASSERT_TRUE(job.layer(0).value_at(0, &value));
  EXPECT_FLOAT_EQ(value, 5.0f);
}

TEST(JobLayerNorms, RanksWhoseLayersDifferAreNotCombinedLayerByLayer) {
  Model model;
  model.ingest(description(0));
  model.ingest(description(1, "other."));
  for (int32_t r = 0; r < 2; ++r) model.ingest(record(r, 0));
  EXPECT_EQ(model.job_layer_norms().layer_count(), 0u);
  EXPECT_NE(model.job_grad_norm(), nullptr) << "the job's norm does not name layers";
}

Model recording_of(int32_t rank, int64_t steps) {
  Model file;
  file.ingest(description(rank));
  for (int64_t s = 0; s < steps; ++s) file.ingest(record(rank, s));
  return file;
}

TEST(JobLayerNorms, RanksOpenedFromTheirRecordingsAreCombinedOnceTheLastIsAdopted) {
  Model app;
  ASSERT_EQ(app.adopt_runs(recording_of(0, 40)), 1u);
  EXPECT_EQ(app.job_layer_norms().layer_count(), 0u) << "rank 1 is not open yet";
  ASSERT_EQ(app.adopt_runs(recording_of(1, 40)), 1u);
  ASSERT_EQ(app.job_layer_norms().layer_count(), kLayers);
  EXPECT_EQ(app.job_layer_norms().layer(0).origin_step(), 0);
  EXPECT_EQ(app.job_layer_norms().last_step(), 39);
  expect_job_layers(app.job_layer_norms(), 0, 39);
}

TEST(JobLayerNorms, TheirMemoryIsCounted) {
  Model model;
  for (int32_t r = 0; r < 2; ++r) model.ingest(description(r));
  const size_t before = model.bytes_used();
  for (int32_t r = 0; r < 2; ++r) model.ingest(record(r, 0));
  ASSERT_EQ(model.job_layer_norms().layer_count(), kLayers);
  EXPECT_GE(model.bytes_used() - before, model.job_layer_norms().bytes_used() - sizeof(JobLayerNorms));
  EXPECT_GE(model.job_layer_norms().bytes_used(), kLayers * sizeof(SeriesHistory));
}

TEST(JobLayerNorms, TheRanksStripsJobRowIsEachLayersRangeOfTheJobsNorms) {
  Model model;
  for (int32_t r = 0; r < 2; ++r) model.ingest(description(r));
  for (int64_t s = 0; s < 10; ++s) {
    wire::StepRecord poisoned = record(1, s);
    if (s == 7) poisoned.layer_values[2] = std::numeric_limits<float>::infinity();
    model.ingest(record(0, s));
    model.ingest(poisoned);
  }
  std::vector<Summary> cells;
  // Steps 0-3, one stored bucket of the coarse level a 4-step column reads (a cell may reach
  // less than a bucket past its edges, as a rank's).
  ASSERT_TRUE(job_layer_cells(model.job_layer_norms(), 0, 3, kLayers, cells));
  ASSERT_EQ(cells.size(), kLayers);
  for (size_t l = 0; l < kLayers; ++l) {
    ASSERT_TRUE(cells[l].has_finite()) << "layer " << l;
    EXPECT_FLOAT_EQ(cells[l].min, 5.0f * float(l + 1) * 1.0f) << "layer " << l;
    EXPECT_FLOAT_EQ(cells[l].max, 5.0f * float(l + 1) * 4.0f) << "layer " << l;
    EXPECT_FALSE(cells[l].has_nonfinite()) << "layer " << l;
  }
  ASSERT_TRUE(job_layer_cells(model.job_layer_norms(), 0, 9, kLayers, cells));
  EXPECT_TRUE(cells[2].has_nonfinite()) << "rank 1's Inf at step 7 shows in the job's row";
  EXPECT_FALSE(cells[1].has_nonfinite());
  EXPECT_FALSE(job_layer_cells(model.job_layer_norms(), 0, 9, kLayers + 1, cells)) << "another model's layers";
  EXPECT_TRUE(cells.empty());
}

}  // namespace
}  // namespace keel::app
