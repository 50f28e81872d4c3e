// A sharded job's per-layer metrics: each layer's sqrt(sum of the ranks' grad_norm^2) at every
// step all ranks sent per-layer values of, and the other metrics as combine_job_layers says, through Model::ingest (any order across ranks) and
// Model::adopt_runs (ranks read from their recordings); none at a step sent as module rollups,
// none for ranks whose layers differ, and a rank's non-finite layer makes that layer's value
// non-finite alone.
#include "model/model.hpp"
#include "model/rank_overview.hpp"

#include <gtest/gtest.h>

#include <array>
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

void expect_job_layers(const JobLayerValues& job, int64_t first, int64_t last) {
  ASSERT_EQ(job.layer_count(), kLayers);
  for (size_t l = 0; l < kLayers; ++l) {
    for (int64_t s = first; s <= last; ++s) {
      float value = 0;
      ASSERT_TRUE(job.layer(wire::LayerMetric::kGradNorm, l).value_at(s, &value)) << "layer " << l << " step " << s;
      EXPECT_FLOAT_EQ(value, 5.0f * float(l + 1) * float(s + 1)) << "layer " << l << " step " << s;
    }
  }
}

TEST(JobLayerValues, AreEachLayersShardNormsCombinedOnceEveryRankSentTheStep) {
  Model model;
  for (int32_t r = 0; r < 2; ++r) model.ingest(description(r));
  model.ingest(record(0, 0));
  model.ingest(record(0, 1));
  EXPECT_EQ(model.job_layer_values().layer_count(), 0u) << "rank 1 has sent nothing yet";
  model.ingest(record(1, 0));
  model.ingest(record(1, 1));
  EXPECT_EQ(model.job_layer_values().world_size(), 2);
  expect_job_layers(model.job_layer_values(), 0, 1);
  // Each rank's own rows keep its shards' norms.
  float own = 0;
  ASSERT_TRUE(model.current_run(1)->layer_series(2, wire::LayerMetric::kGradNorm).value_at(1, &own));
  EXPECT_FLOAT_EQ(own, 24.0f);
}

TEST(JobLayerValues, AStepSentAsModuleRollupsHasNoLayerValuesButTheJobsNorm) {
  Model model;
  for (int32_t r = 0; r < 2; ++r) model.ingest(description(r));
  for (int32_t r = 0; r < 2; ++r) model.ingest(record(r, 0));
  for (int32_t r = 0; r < 2; ++r) model.ingest(rollup(r, 1));
  for (int32_t r = 0; r < 2; ++r) model.ingest(record(r, 2));
  const JobLayerValues& job = model.job_layer_values();
  ASSERT_EQ(job.layer_count(), kLayers);
  float value = 0;
  EXPECT_FALSE(job.layer(wire::LayerMetric::kGradNorm, 0).value_at(1, &value)) << "a module's worst layer is no layer's norm";
  ASSERT_TRUE(job.layer(wire::LayerMetric::kGradNorm, 0).value_at(2, &value));
  EXPECT_FLOAT_EQ(value, 15.0f);
  ASSERT_NE(model.job_grad_norm(), nullptr);
  EXPECT_TRUE(model.job_grad_norm()->value_at(1, &value)) << "the job's norm is combined at every step";
}

TEST(JobLayerValues, ANonfiniteLayerOfOneRankMakesThatLayerOfTheJobNonfinite) {
  Model model;
  for (int32_t r = 0; r < 2; ++r) model.ingest(description(r));
  wire::StepRecord poisoned = record(1, 0);
  poisoned.layer_values[1] = std::numeric_limits<float>::quiet_NaN();
  model.ingest(record(0, 0));
  model.ingest(poisoned);
  const JobLayerValues& job = model.job_layer_values();
  ASSERT_EQ(job.layer_count(), kLayers);
  float value = 0;
  ASSERT_TRUE(job.layer(wire::LayerMetric::kGradNorm, 1).value_at(0, &value));
  EXPECT_TRUE(std::isnan(value));
  ASSERT_TRUE(job.layer(wire::LayerMetric::kGradNorm, 0).value_at(0, &value));
  EXPECT_FLOAT_EQ(value, 5.0f);
}

TEST(JobLayerValues, RanksWhoseLayersDifferAreNotCombinedLayerByLayer) {
  Model model;
  model.ingest(description(0));
  model.ingest(description(1, "other."));
  for (int32_t r = 0; r < 2; ++r) model.ingest(record(r, 0));
  EXPECT_EQ(model.job_layer_values().layer_count(), 0u);
  EXPECT_NE(model.job_grad_norm(), nullptr) << "the job's norm does not name layers";
}

Model recording_of(int32_t rank, int64_t steps) {
  Model file;
  file.ingest(description(rank));
  for (int64_t s = 0; s < steps; ++s) file.ingest(record(rank, s));
  return file;
}

TEST(JobLayerValues, RanksOpenedFromTheirRecordingsAreCombinedOnceTheLastIsAdopted) {
  Model app;
  ASSERT_EQ(app.adopt_runs(recording_of(0, 40)), 1u);
  EXPECT_EQ(app.job_layer_values().layer_count(), 0u) << "rank 1 is not open yet";
  ASSERT_EQ(app.adopt_runs(recording_of(1, 40)), 1u);
  ASSERT_EQ(app.job_layer_values().layer_count(), kLayers);
  EXPECT_EQ(app.job_layer_values().origin_step(), 0);
  EXPECT_EQ(app.job_layer_values().last_step(), 39);
  expect_job_layers(app.job_layer_values(), 0, 39);
}

TEST(JobLayerValues, TheirMemoryIsCounted) {
  Model model;
  for (int32_t r = 0; r < 2; ++r) model.ingest(description(r));
  const size_t before = model.bytes_used();
  for (int32_t r = 0; r < 2; ++r) model.ingest(record(r, 0));
  ASSERT_EQ(model.job_layer_values().layer_count(), kLayers);
  EXPECT_GE(model.bytes_used() - before, model.job_layer_values().bytes_used() - sizeof(JobLayerValues));
  EXPECT_GE(model.job_layer_values().bytes_used(), kLayers * 4 * sizeof(SeriesHistory)) << "four metrics";
}

TEST(JobLayerValues, TheRanksStripsJobRowIsEachLayersRangeOfTheJobsNorms) {
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
  ASSERT_TRUE(job_layer_cells(model.job_layer_values(), wire::LayerMetric::kGradNorm, 0, 3, kLayers, cells));
  ASSERT_EQ(cells.size(), kLayers);
  for (size_t l = 0; l < kLayers; ++l) {
    ASSERT_TRUE(cells[l].has_finite()) << "layer " << l;
    EXPECT_FLOAT_EQ(cells[l].min, 5.0f * float(l + 1) * 1.0f) << "layer " << l;
    EXPECT_FLOAT_EQ(cells[l].max, 5.0f * float(l + 1) * 4.0f) << "layer " << l;
    EXPECT_FALSE(cells[l].has_nonfinite()) << "layer " << l;
  }
  ASSERT_TRUE(job_layer_cells(model.job_layer_values(), wire::LayerMetric::kGradNorm, 0, 9, kLayers, cells));
  EXPECT_TRUE(cells[2].has_nonfinite()) << "rank 1's Inf at step 7 shows in the job's row";
  EXPECT_FALSE(cells[1].has_nonfinite());
  EXPECT_FALSE(job_layer_cells(model.job_layer_values(), wire::LayerMetric::kGradNorm, 0, 9, kLayers + 1, cells)) << "another model's layers";
  EXPECT_TRUE(cells.empty());
}

// Every metric of a layer on one rank, in the order of wire::LayerMetric.
struct Shard {
  float grad_norm, grad_absmax, grad_nonfinite, grad_zero_frac, param_norm, update_ratio;
  std::array<float, wire::kLayerMetricCount> values() const {
    return {grad_norm, grad_absmax, grad_nonfinite, grad_zero_frac, param_norm, update_ratio};
  }
};

// Each rank's description with its own element count for every layer (its shards').
wire::RunDescription description_of_shards(int32_t rank, int64_t numel) {
  wire::RunDescription d = description(rank);
  for (auto& layer : d.layers) {
    layer.shape = {numel};
    layer.numel = numel;
  }
  return d;
}

// Every layer of `rank` at `step` with the values of `shard`, for the metrics in `mask`.
wire::StepRecord record_of_shard(int32_t rank, int64_t step, const Shard& shard, uint32_t mask = 0x3f) {
  wire::StepRecord r;
  r.run = "host-" + std::to_string(100 + rank) + "-1";
  r.rank = rank;
  r.step = step;
  r.layer_count = kLayers;
  r.metric_mask = mask;
  const auto values = shard.values();
  for (size_t m = 0; m < static_cast<size_t>(wire::kLayerMetricCount); ++m) {
    if ((mask & (1u << m)) == 0) continue;
    for (size_t l = 0; l < kLayers; ++l) r.layer_values.push_back(values[m]);
  }
  r.grad_norm = shard.grad_norm * std::sqrt(float(kLayers));
  return r;
}

float job_value(const Model& model, wire::LayerMetric metric, size_t layer, int64_t step) {
  float value = -1;
  EXPECT_TRUE(model.job_layer_values().layer(metric, layer).value_at(step, &value))
      << wire::info_of(metric).name << " layer " << layer << " step " << step;
  return value;
}

TEST(JobLayerValues, EveryMetricIsTheWholeLayersFromItsShards) {
  Model model;
  model.ingest(description_of_shards(0, 4));
  model.ingest(description_of_shards(1, 12));
  // Rank 0 holds 4 elements of each layer, 2 of them zero; rank 1 holds 12, 3 of them zero.
  model.ingest(record_of_shard(0, 0, {3.0f, 1.5f, 0.0f, 0.5f, 3.0f, 0.1f}));
  model.ingest(record_of_shard(1, 0, {4.0f, 2.5f, 2.0f, 0.25f, 4.0f, 0.2f}));
  using wire::LayerMetric;
  for (size_t l = 0; l < kLayers; ++l) {
    EXPECT_FLOAT_EQ(job_value(model, LayerMetric::kGradNorm, l, 0), 5.0f);
    EXPECT_FLOAT_EQ(job_value(model, LayerMetric::kGradAbsmax, l, 0), 2.5f);
    EXPECT_FLOAT_EQ(job_value(model, LayerMetric::kGradZeroFrac, l, 0), 5.0f / 16.0f);
    // |dW| of the shards: 0.3 and 0.8; of the layer, sqrt(0.09 + 0.64) over |W| = 5.
    EXPECT_FLOAT_EQ(job_value(model, LayerMetric::kUpdateRatio, l, 0), std::sqrt(0.73f) / 5.0f);
  }
}

TEST(JobLayerValues, ARankHoldingNoneOfALayerLeavesItTheOthersValues) {
  Model model;
  model.ingest(description_of_shards(0, 8));
  model.ingest(description_of_shards(1, 0));
  // As the probe sends an empty part: no gradient, no weights, a ratio of 0.
  model.ingest(record_of_shard(0, 0, {3.0f, 1.5f, 0.0f, 0.25f, 2.0f, 0.1f}));
  model.ingest(record_of_shard(1, 0, {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f}));
  using wire::LayerMetric;
  EXPECT_FLOAT_EQ(job_value(model, LayerMetric::kGradNorm, 1, 0), 3.0f);
  EXPECT_FLOAT_EQ(job_value(model, LayerMetric::kGradZeroFrac, 1, 0), 0.25f);
  EXPECT_FLOAT_EQ(job_value(model, LayerMetric::kUpdateRatio, 1, 0), 0.1f);
}

TEST(JobLayerValues, OneShardsNonfiniteValueMakesTheLayersNonfinite) {
  Model model;
  for (int32_t r = 0; r < 2; ++r) model.ingest(description_of_shards(r, 4));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  model.ingest(record_of_shard(0, 0, {3.0f, 1.5f, 0.0f, 0.5f, 3.0f, 0.1f}));
  model.ingest(record_of_shard(1, 0, {nan, nan, 4.0f, 0.0f, 4.0f, inf}));
  using wire::LayerMetric;
  EXPECT_TRUE(std::isnan(job_value(model, LayerMetric::kGradNorm, 0, 0)));
  EXPECT_TRUE(std::isnan(job_value(model, LayerMetric::kGradAbsmax, 0, 0)));
  EXPECT_TRUE(std::isinf(job_value(model, LayerMetric::kUpdateRatio, 0, 0)));
  // A NaN weight norm makes the update's ratio NaN, never a finite number.
  model.ingest(record_of_shard(0, 1, {3.0f, 1.5f, 0.0f, 0.5f, 3.0f, 0.1f}));
  model.ingest(record_of_shard(1, 1, {4.0f, 2.5f, 0.0f, 0.0f, nan, 0.2f}));
  EXPECT_TRUE(std::isnan(job_value(model, LayerMetric::kUpdateRatio, 0, 1)));
}

TEST(JobLayerValues, AMetricIsCombinedOnlyWhereEveryRankSentIt) {
  Model model;
  for (int32_t r = 0; r < 2; ++r) model.ingest(description_of_shards(r, 4));
  const Shard shard{3.0f, 1.5f, 0.0f, 0.5f, 3.0f, 0.1f};
  const uint32_t grads_and_ratio = 0x01 | 0x02 | 0x20;   // rank 1 sends no param_norm
  model.ingest(record_of_shard(0, 0, shard));
  model.ingest(record_of_shard(1, 0, shard, grads_and_ratio));
  using wire::LayerMetric;
  const JobLayerValues& job = model.job_layer_values();
  ASSERT_EQ(job.layer_count(), kLayers);
  float value = 0;
  EXPECT_TRUE(job.layer(LayerMetric::kGradNorm, 0).value_at(0, &value));
  EXPECT_TRUE(job.layer(LayerMetric::kGradAbsmax, 0).value_at(0, &value));
  EXPECT_FALSE(job.layer(LayerMetric::kGradZeroFrac, 0).value_at(0, &value)) << "rank 1 did not send it";
  EXPECT_FALSE(job.layer(LayerMetric::kUpdateRatio, 0).value_at(0, &value)) << "no |W| of rank 1 to weigh it by";
}

TEST(JobLayerValues, TheRanksStripsJobRowShowsTheHeatmapsMetric) {
  Model model;
  for (int32_t r = 0; r < 2; ++r) model.ingest(description_of_shards(r, 4));
  for (int64_t s = 0; s < 4; ++s) {
    model.ingest(record_of_shard(0, s, {3.0f, 1.5f, 0.0f, 0.5f, 3.0f, 0.1f}));
    model.ingest(record_of_shard(1, s, {4.0f, 2.5f, 0.0f, 0.25f, 4.0f, 0.2f}));
  }
  std::vector<Summary> cells;
  ASSERT_TRUE(job_layer_cells(model.job_layer_values(), wire::LayerMetric::kUpdateRatio, 0, 3, kLayers, cells));
  ASSERT_EQ(cells.size(), kLayers);
  EXPECT_FLOAT_EQ(cells[0].max, std::sqrt(0.73f) / 5.0f);
  ASSERT_TRUE(job_layer_cells(model.job_layer_values(), wire::LayerMetric::kGradAbsmax, 0, 3, kLayers, cells));
  EXPECT_FLOAT_EQ(cells[2].max, 2.5f);
  EXPECT_FALSE(job_layer_cells(model.job_layer_values(), wire::LayerMetric::kParamNorm, 0, 3, kLayers, cells))
      << "not a heatmap metric: not kept for the job";
}

}  // namespace
}  // namespace keel::app
