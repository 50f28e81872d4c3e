// RunModel's module values: a module's value at a step is its worst layer's (the max, never the
// mean; the sum of non-finite counts), a non-finite layer makes its module and every module
// above it non-finite, and the histories follow their paths when the layers are re-laid out.
// Each test runs on both kinds of history: merged from the layers at query time (a model that
// does not fold by default) and kept as series (a model of more than kFoldAboveLayers tensors,
// here the same modules after kFoldAboveLayers padding tensors of a module of their own).
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

// Whether the test's model is wide enough to keep module series.
class ModuleSeries : public ::testing::TestWithParam<bool> {
 protected:
  bool kept() const { return GetParam(); }
  // The names, and past the fold threshold padding tensors pad.<i>.weight (module "pad").
  std::vector<std::string> names(std::vector<std::string> names = kNames) const {
    if (kept()) {
      for (size_t i = 0; i < kFoldAboveLayers; ++i) names.push_back("pad." + std::to_string(i) + ".weight");
    }
    return names;
  }
  size_t padding() const { return kept() ? kFoldAboveLayers : 0; }
};

wire::RunDescription describe(const std::vector<std::string>& names) {
  wire::RunDescription description;
  description.run_id = "moe";
  for (const std::string& name : names) description.layers.push_back({name, {2, 2}, 4, "float32"});
  return description;
}

// Every metric of layer i is values[i]; `padding` more layers of value 0.
wire::StepRecord record_at(int64_t step, std::vector<float> values, size_t padding) {
  values.resize(values.size() + padding, 0.0f);
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

Summary cell_over(const RunModel& run, size_t module, LayerMetric metric, int64_t first, int64_t last) {
  Summary cell;
  run.module_summarize(module, metric, ColumnGrid(first, last, 1), &cell);
  return cell;
}

// The module's value at one step, as its one-step cell shows it.
float value_at(const RunModel& run, size_t module, LayerMetric metric, int64_t step) {
  return cell_over(run, module, metric, step, step).max;
}

TEST_P(ModuleSeries, AModuleIsItsWorstLayerNotTheMean) {
  RunModel run("moe", 0, ModelConfig{});
  run.describe(describe(names()));
  ASSERT_EQ(run.modules().module_count(), kept() ? 6u : 5u);
  EXPECT_EQ(run.keeps_module_series(), kept());
  ASSERT_TRUE(run.add_step(record_at(0, {1, 2, 30, 4, 5}, padding())));
  ASSERT_TRUE(run.add_step(record_at(1, {7, 2, 3, 4, 5}, padding())));
  const size_t expert0 = module_named(run, "blocks.0.experts.0");
  const size_t experts = module_named(run, "blocks.0.experts");
  const size_t block = module_named(run, "blocks.0");
  EXPECT_EQ(value_at(run, expert0, LayerMetric::kGradNorm, 0), 2.0f);
  EXPECT_EQ(value_at(run, experts, LayerMetric::kGradNorm, 0), 30.0f) << "the max of its layers, not their mean (8.25)";
  EXPECT_EQ(value_at(run, block, LayerMetric::kUpdateRatio, 1), 7.0f);
  EXPECT_EQ(run.module_latest(experts, LayerMetric::kGradAbsmax), 7.0f);
  // Over a cell of both steps, the module's max is its worst layer's worst step.
  EXPECT_EQ(cell_over(run, block, LayerMetric::kGradNorm, 0, 1).max, 30.0f);
  EXPECT_EQ(run.worst_layer(experts, LayerMetric::kGradNorm, 0, 1), 2);
  EXPECT_EQ(run.worst_layer(experts, LayerMetric::kGradNorm, 1, 1), 0);
}

TEST_P(ModuleSeries, NonfiniteCountsAddUp) {
  RunModel run("moe", 0, ModelConfig{});
  run.describe(describe(names()));
  ASSERT_TRUE(run.add_step(record_at(0, {1, 2, 3, 0, 5}, padding())));
  EXPECT_EQ(run.module_latest(module_named(run, "blocks.0.experts"), LayerMetric::kGradNonfinite), 6.0f);
  EXPECT_EQ(run.module_latest(module_named(run, "blocks"), LayerMetric::kGradNonfinite), 11.0f);
  EXPECT_EQ(value_at(run, module_named(run, "blocks.0.experts"), LayerMetric::kGradNonfinite, 0), 6.0f);
}

TEST_P(ModuleSeries, ANonfiniteLayerMakesEveryModuleAboveItNonfinite) {
  RunModel run("moe", 0, ModelConfig{});
  run.describe(describe(names()));
  ASSERT_TRUE(run.add_step(record_at(0, {1, 2, 3, 4, 5}, padding())));
  ASSERT_TRUE(run.add_step(record_at(1, {1, 2, 3, kNan, 5}, padding())));
  ASSERT_TRUE(run.add_step(record_at(2, {kInf, 2, 3, 4, 5}, padding())));
  ASSERT_TRUE(run.add_step(record_at(3, {1, 2, 3, 4, 5}, padding())));
  for (const char* path : {"blocks.0.experts.1", "blocks.0.experts", "blocks.0", "blocks"}) {
    const size_t module = module_named(run, path);
    EXPECT_TRUE(cell_over(run, module, LayerMetric::kGradNorm, 1, 1).has_nan()) << path;
    // A wide cell holding the NaN step is flagged however many finite steps surround it.
    EXPECT_TRUE(cell_over(run, module, LayerMetric::kGradNorm, 0, 3).has_nonfinite()) << path;
    EXPECT_FALSE(cell_over(run, module, LayerMetric::kGradNorm, 3, 3).has_nonfinite()) << path;
  }
  EXPECT_FALSE(cell_over(run, module_named(run, "blocks.0.experts.0"), LayerMetric::kGradNorm, 1, 1).has_nonfinite())
      << "the sibling expert stays finite";
  EXPECT_TRUE(cell_over(run, module_named(run, "blocks"), LayerMetric::kGradNorm, 2, 2).has_posinf());
  EXPECT_EQ(run.worst_layer(module_named(run, "blocks"), LayerMetric::kGradNorm, 0, 3), 0)
      << "the first layer with a non-finite value in the steps";
}

TEST_P(ModuleSeries, ALayerWithoutAGradientIsLeftOutOfItsModule) {
  RunModel run("moe", 0, ModelConfig{});
  run.describe(describe(names()));
  wire::StepRecord record = record_at(0, {1, 50, 3, 4, 5}, padding());
  record.frozen_layers = {1};
  ASSERT_TRUE(run.add_step(record));
  EXPECT_EQ(run.module_latest(module_named(run, "blocks.0.experts.0"), LayerMetric::kGradNorm), 1.0f);
  EXPECT_EQ(run.module_latest(module_named(run, "blocks.0.experts.0"), LayerMetric::kParamNorm), 50.0f)
      << "its weight metrics still count";
  EXPECT_EQ(value_at(run, module_named(run, "blocks.0.experts.0"), LayerMetric::kGradNorm, 0), 1.0f);
  EXPECT_EQ(run.module_latest_step(module_named(run, "blocks.0.experts.0"), LayerMetric::kGradNorm), 0);
}

TEST_P(ModuleSeries, ModuleSeriesFollowTheirPathWhenLayersAreReLaidOut) {
  RunModel run("moe", 0, ModelConfig{});
  run.describe(describe(names()));
  ASSERT_TRUE(run.add_step(record_at(0, {1, 2, 3, 4, 5}, padding())));
  std::vector<std::string> renamed = kNames;
  renamed.insert(renamed.begin(), "embed.weight");
  run.describe(describe(names(renamed)));
  ASSERT_TRUE(run.add_step(record_at(1, {9, 1, 2, 3, 4, 5}, padding())));
  const size_t experts = module_named(run, "blocks.0.experts");
  EXPECT_EQ(value_at(run, experts, LayerMetric::kGradNorm, 0), 4.0f) << "the step before the re-layout is kept";
  EXPECT_EQ(value_at(run, experts, LayerMetric::kGradNorm, 1), 4.0f);
}

TEST_P(ModuleSeries, OnlyAModelThatFoldsKeepsModuleSeries) {
  RunModel run("moe", 0, ModelConfig{});
  run.describe(describe(names()));
  ASSERT_TRUE(run.add_step(record_at(0, {1, 2, 3, 4, 5}, padding())));
  const size_t layers = kNames.size() + padding();
  // Layers, modules where kept, globals, and no watches: 6 metrics each.
  EXPECT_EQ(run.series_count(), size_t(6 * (layers + (kept() ? 6 : 0)) + kGlobalSeriesCount));
  EXPECT_EQ(run.module_series(module_named(run, "blocks"), LayerMetric::kGradNorm).empty(), !kept());
}

INSTANTIATE_TEST_SUITE_P(Histories, ModuleSeries, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? std::string("KeptSeries") : std::string("MergedFromLayers");
                         });

}  // namespace
}  // namespace keel::app
