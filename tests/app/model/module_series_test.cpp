// RunModel's module series: a module's value at a step is its worst layer's (the max, never the
// mean; the sum of non-finite counts), a non-finite layer makes its module and every module
// above it non-finite, and the series follow their paths when the layers are re-laid out.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "model/run_model.hpp"

namespace keel::app {
namespace {

using wire::LayerMetric;

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// blocks.0.experts.{0,1}.{w1,w2}.weight and blocks.0.router.weight: modules blocks,
// blocks.0, blocks.0.experts, blocks.0.experts.0, blocks.0.experts.1.
const std::vector<std::string> kNames = {"blocks.0.experts.0.w1.weight", "blocks.0.experts.0.w2.weight",
                                         "blocks.0.experts.1.w1.weight", "blocks.0.experts.1.w2.weight",
                                         "blocks.0.router.weight"};

wire::RunDescription describe(const std::vector<std::string>& names) {
  wire::RunDescription description;
  description.run_id = "moe";
  for (const std::string& name : names) description.layers.push_back({name, {2, 2}, 4, "float32"});
  return description;
}

// Every metric of layer i is values[i].
wire::StepRecord record_at(int64_t step, const std::vector<float>& values) {
  wire::StepRecord record;
  record.step = step;
  record.seq = uint64_t(step);
  record.layer_count = uint32_t(values.size());
  record.metric_mask = wire::kAllLayerMetrics;
  for (int m = 0; m < wire::kLayerMetricCount; ++m) {
    record.layer_values.insert(record.layer_values.end(), values.begin(), values.end());
  }
  return record;
}

size_t module_named(const RunModel& run, const std::string& path) {
  for (size_t i = 0; i < run.modules().module_count(); ++i) {
    if (run.modules().module(i).path == path) return i;
  }
  ADD_FAILURE() << "no module " << path;
  return 0;
}

Summary cell_over(const SeriesHistory& series, int64_t first, int64_t last) {
  Summary cell;
  series.summarize(ColumnGrid(first, last, 1), &cell);
  return cell;
}

TEST(ModuleSeries, AModuleIsItsWorstLayerNotTheMean) {
  RunModel run("moe", 0, ModelConfig{});
  run.describe(describe(kNames));
  ASSERT_EQ(run.modules().module_count(), 5u);
  ASSERT_TRUE(run.add_step(record_at(0, {1, 2, 30, 4, 5})));
  ASSERT_TRUE(run.add_step(record_at(1, {7, 2, 3, 4, 5})));
  const size_t expert0 = module_named(run, "blocks.0.experts.0");
  const size_t experts = module_named(run, "blocks.0.experts");
  const size_t block = module_named(run, "blocks.0");
  float value = 0;
  ASSERT_TRUE(run.module_series(expert0, LayerMetric::kGradNorm).value_at(0, &value));
  EXPECT_EQ(value, 2.0f);
  ASSERT_TRUE(run.module_series(experts, LayerMetric::kGradNorm).value_at(0, &value));
  EXPECT_EQ(value, 30.0f) << "the max of its layers, not their mean (8.25)";
  ASSERT_TRUE(run.module_series(block, LayerMetric::kUpdateRatio).value_at(1, &value));
  EXPECT_EQ(value, 7.0f);
  EXPECT_EQ(run.module_latest(experts, LayerMetric::kGradAbsmax), 7.0f);
  // Over a cell of both steps, the module's max is its worst layer's worst step.
  EXPECT_EQ(cell_over(run.module_series(block, LayerMetric::kGradNorm), 0, 1).max, 30.0f);
  EXPECT_EQ(run.worst_layer(experts, LayerMetric::kGradNorm, 0, 1), 2);
  EXPECT_EQ(run.worst_layer(experts, LayerMetric::kGradNorm, 1, 1), 0);
}

TEST(ModuleSeries, NonfiniteCountsAddUp) {
  RunModel run("moe", 0, ModelConfig{});
  run.describe(describe(kNames));
  ASSERT_TRUE(run.add_step(record_at(0, {1, 2, 3, 0, 5})));
  EXPECT_EQ(run.module_latest(module_named(run, "blocks.0.experts"), LayerMetric::kGradNonfinite), 6.0f);
  EXPECT_EQ(run.module_latest(module_named(run, "blocks"), LayerMetric::kGradNonfinite), 11.0f);
}

TEST(ModuleSeries, ANonfiniteLayerMakesEveryModuleAboveItNonfinite) {
  RunModel run("moe", 0, ModelConfig{});
  run.describe(describe(kNames));
  ASSERT_TRUE(run.add_step(record_at(0, {1, 2, 3, 4, 5})));
  ASSERT_TRUE(run.add_step(record_at(1, {1, 2, 3, kNan, 5})));
  ASSERT_TRUE(run.add_step(record_at(2, {kInf, 2, 3, 4, 5})));
  ASSERT_TRUE(run.add_step(record_at(3, {1, 2, 3, 4, 5})));
  for (const char* path : {"blocks.0.experts.1", "blocks.0.experts", "blocks.0", "blocks"}) {
    const SeriesHistory& series = run.module_series(module_named(run, path), LayerMetric::kGradNorm);
    EXPECT_TRUE(cell_over(series, 1, 1).has_nan()) << path;
    // A wide cell holding the NaN step is flagged however many finite steps surround it.
    EXPECT_TRUE(cell_over(series, 0, 3).has_nonfinite()) << path;
    EXPECT_FALSE(cell_over(series, 3, 3).has_nonfinite()) << path;
  }
  EXPECT_FALSE(cell_over(run.module_series(module_named(run, "blocks.0.experts.0"), LayerMetric::kGradNorm), 1, 1)
                   .has_nonfinite())
      << "the sibling expert stays finite";
  EXPECT_TRUE(cell_over(run.module_series(module_named(run, "blocks"), LayerMetric::kGradNorm), 2, 2).has_posinf());
  EXPECT_EQ(run.worst_layer(module_named(run, "blocks"), LayerMetric::kGradNorm, 0, 3), 0)
      << "the first layer with a non-finite value in the steps";
}

TEST(ModuleSeries, ALayerWithoutAGradientIsLeftOutOfItsModule) {
  RunModel run("moe", 0, ModelConfig{});
  run.describe(describe(kNames));
  wire::StepRecord record = record_at(0, {1, 50, 3, 4, 5});
  record.frozen_layers = {1};
  ASSERT_TRUE(run.add_step(record));
  EXPECT_EQ(run.module_latest(module_named(run, "blocks.0.experts.0"), LayerMetric::kGradNorm), 1.0f);
  EXPECT_EQ(run.module_latest(module_named(run, "blocks.0.experts.0"), LayerMetric::kParamNorm), 50.0f)
      << "its weight metrics still count";
}

TEST(ModuleSeries, ModuleSeriesFollowTheirPathWhenLayersAreReLaidOut) {
  RunModel run("moe", 0, ModelConfig{});
  run.describe(describe(kNames));
  ASSERT_TRUE(run.add_step(record_at(0, {1, 2, 3, 4, 5})));
  std::vector<std::string> renamed = kNames;
  renamed.insert(renamed.begin(), "embed.weight");
  run.describe(describe(renamed));
  ASSERT_TRUE(run.add_step(record_at(1, {9, 1, 2, 3, 4, 5})));
  float value = 0;
  const SeriesHistory& experts = run.module_series(module_named(run, "blocks.0.experts"), LayerMetric::kGradNorm);
  ASSERT_TRUE(experts.value_at(0, &value)) << "the step before the re-layout is kept";
  EXPECT_EQ(value, 4.0f);
  ASSERT_TRUE(experts.value_at(1, &value));
  EXPECT_EQ(value, 4.0f);
}

TEST(ModuleSeries, ModuleSeriesCountInTheMemoryOfTheRun) {
  RunModel run("moe", 0, ModelConfig{});
  run.describe(describe(kNames));
  ASSERT_TRUE(run.add_step(record_at(0, {1, 2, 3, 4, 5})));
  // Layers, modules, globals and the watch-less run: 6 metrics of 5 layers and 5 modules.
  EXPECT_EQ(run.series_count(), size_t(6 * (5 + 5) + kGlobalSeriesCount));
}

}  // namespace
}  // namespace keel::app
