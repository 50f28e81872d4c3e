// RunModel's module rollups: a wide model's probe sends per-layer values every few steps and,
// on the steps between, each described module's worst layer (StepRecord::module_values). The
// folded module rows must then have a value at every step, each module above the described ones
// the worst of those below it (NaN kept, non-finite counts summed), and a rollup that does not
// fit the description must be refused, not stored by index into other modules.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "model/model.hpp"
#include "model/run_model.hpp"

namespace keel::app {
namespace {

using wire::LayerMetric;

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

// The tree: blocks, blocks.{0,1}, blocks.{0,1}.experts, blocks.{0,1}.experts.{0,1}; embed.weight
// and the norms have no module of their own (a tree's leaf is its last two components).
const std::vector<std::string> kNames = {
    "embed.weight",                                                  // 0
    "blocks.0.experts.0.w1.weight", "blocks.0.experts.0.w2.weight",  // 1, 2
    "blocks.0.experts.1.w1.weight", "blocks.0.experts.1.w2.weight",  // 3, 4
    "blocks.0.norm.weight",                                          // 5
    "blocks.1.experts.0.w1.weight", "blocks.1.experts.0.w2.weight",  // 6, 7
    "blocks.1.experts.1.w1.weight", "blocks.1.experts.1.w2.weight",  // 8, 9
    "blocks.1.norm.weight"};                                         // 10

// What the probe plans for these names (its module paths less the last component, depth 3).
const std::vector<wire::ModuleRange> kWireModules = {{"embed", 0, 1},
                                                     {"blocks.0.experts", 1, 4},
                                                     {"blocks.0.norm", 5, 1},
                                                     {"blocks.1.experts", 6, 4},
                                                     {"blocks.1.norm", 10, 1}};

wire::RunDescription description(std::vector<wire::ModuleRange> modules = kWireModules) {
  wire::RunDescription d;
  d.run_id = "moe";
  for (const std::string& name : kNames) d.layers.push_back({name, {2, 2}, 4, "float32"});
  d.modules = std::move(modules);
  return d;
}

// Every metric of layer i is values[i].
wire::StepRecord layer_record(int64_t step, const std::vector<float>& values) {
  wire::StepRecord record;
  record.run = "moe";
  record.step = step;
  record.seq = uint64_t(step);
  record.layer_count = uint32_t(values.size());
  record.metric_mask = wire::kAllLayerMetrics;
  for (int m = 0; m < wire::kLayerMetricCount; ++m) {
    record.layer_values.insert(record.layer_values.end(), values.begin(), values.end());
  }
  return record;
}

// A rollup step: every metric of wire module k is values[k]; no layer values.
wire::StepRecord rollup_record(int64_t step, const std::vector<float>& values) {
  wire::StepRecord record;
  record.run = "moe";
  record.step = step;
  record.seq = uint64_t(step);
  record.layer_count = uint32_t(kNames.size());
  record.metric_mask = 0;
  record.module_mask = wire::kAllLayerMetrics;
  record.module_count = uint32_t(values.size());
  for (int m = 0; m < wire::kLayerMetricCount; ++m) {
    record.module_values.insert(record.module_values.end(), values.begin(), values.end());
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

Summary module_cell(const RunModel& run, const std::string& path, LayerMetric metric, int64_t step) {
  Summary cell;
  run.module_summarize(module_named(run, path), metric, ColumnGrid(step, step, 1), &cell);
  return cell;
}

Summary layer_cell(const RunModel& run, size_t layer, LayerMetric metric, int64_t step) {
  Summary cell;
  run.layer_series(layer, metric).summarize(ColumnGrid(step, step, 1), &cell);
  return cell;
}

const std::vector<float> kLayers(kNames.size(), 1.0f);

TEST(ModuleRollup, AFoldedModuleHasEveryStepAndItsLayersOnlyTheirOwn) {
  RunModel run("moe", 0, ModelConfig{});
  run.describe(description());
  EXPECT_TRUE(run.keeps_module_series()) << "11 layers, but its rollups are the only values of most steps";
  for (int64_t step = 0; step < 40; ++step) {
    ASSERT_TRUE(run.add_step(step % 16 == 0 ? layer_record(step, kLayers)
                                            : rollup_record(step, {9, float(step), 2, 3, 1})));
  }
  for (int64_t step = 0; step < 40; ++step) {
    const float expected = step % 16 == 0 ? 1.0f : float(step);
    EXPECT_EQ(module_cell(run, "blocks.0.experts", LayerMetric::kGradNorm, step).max, expected) << step;
    EXPECT_TRUE(module_cell(run, "blocks", LayerMetric::kUpdateRatio, step).has_finite()) << step;
    // A layer, and a module below the described ones, have the per-layer steps only: a gap.
    EXPECT_EQ(layer_cell(run, 2, LayerMetric::kGradNorm, step).has_finite(), step % 16 == 0) << step;
    EXPECT_EQ(module_cell(run, "blocks.0.experts.1", LayerMetric::kGradNorm, step).has_finite(), step % 16 == 0)
        << step;
  }
  const size_t experts = module_named(run, "blocks.0.experts");
  EXPECT_EQ(run.module_latest(experts, LayerMetric::kGradNorm), 39.0f);
  EXPECT_EQ(run.module_latest_step(experts, LayerMetric::kGradNorm), 39);
  EXPECT_EQ(run.latest_step(2, LayerMetric::kGradNorm), 32) << "a layer's latest is its last per-layer step";
  EXPECT_EQ(run.last_layer_values_step(), 32);
  EXPECT_EQ(run.layer_detail_every(), 16);
  EXPECT_EQ(layer_cadence(run), "per-layer values every 16 steps; modules every step");
  EXPECT_EQ(run.counters().rollup_steps, 37u);
  EXPECT_EQ(run.counters().refused_rollups, 0u);
}

TEST(ModuleRollup, AModuleAboveGetsTheWorstOfTheDescribedModulesBelowIt) {
  RunModel run("moe", 0, ModelConfig{});
  run.describe(description());
  ASSERT_TRUE(run.add_step(layer_record(0, kLayers)));
  // embed, blocks.0.experts, blocks.0.norm, blocks.1.experts, blocks.1.norm
  ASSERT_TRUE(run.add_step(rollup_record(1, {100, 3, 7, 2, 1})));
  EXPECT_EQ(module_cell(run, "blocks.0.experts", LayerMetric::kGradNorm, 1).max, 3.0f);
  // blocks.0.norm has no module of the tree: its value goes to blocks.0, which holds it.
  EXPECT_EQ(module_cell(run, "blocks.0", LayerMetric::kGradNorm, 1).max, 7.0f);
  EXPECT_EQ(module_cell(run, "blocks.1", LayerMetric::kGradNorm, 1).max, 2.0f);
  EXPECT_EQ(module_cell(run, "blocks", LayerMetric::kGradNorm, 1).max, 7.0f)
      << "embed (100) is a top-level layer: no module of the tree holds it";
  // Non-finite counts add up.
  EXPECT_EQ(module_cell(run, "blocks.0", LayerMetric::kGradNonfinite, 1).max, 10.0f);
  EXPECT_EQ(module_cell(run, "blocks", LayerMetric::kGradNonfinite, 1).max, 13.0f);
  EXPECT_EQ(run.module_latest(module_named(run, "blocks"), LayerMetric::kGradAbsmax), 7.0f);
  const size_t none = ModuleTree::kNone;
  for (const char* path : {"blocks", "blocks.0", "blocks.0.experts", "blocks.1.experts"}) {
    EXPECT_TRUE(run.module_has_rollups(module_named(run, path))) << path;
  }
  EXPECT_FALSE(run.module_has_rollups(module_named(run, "blocks.0.experts.1"))) << "below the described modules";
  EXPECT_EQ(run.rollup_targets(),
            (std::vector<size_t>{none, module_named(run, "blocks.0.experts"), module_named(run, "blocks.0"),
                                 module_named(run, "blocks.1.experts"), module_named(run, "blocks.1")}));
}

TEST(ModuleRollup, ANanInOneDescribedModuleMakesEveryModuleAboveItNan) {
  RunModel run("moe", 0, ModelConfig{});
  run.describe(description());
  ASSERT_TRUE(run.add_step(layer_record(0, kLayers)));
  ASSERT_TRUE(run.add_step(rollup_record(1, {1, 5, 1, kNan, 1})));
  for (const char* path : {"blocks.1.experts", "blocks.1", "blocks"}) {
    EXPECT_TRUE(module_cell(run, path, LayerMetric::kGradNorm, 1).has_nan()) << path;
    EXPECT_TRUE(std::isnan(run.module_latest(module_named(run, path), LayerMetric::kGradNorm))) << path;
  }
  const Summary sibling = module_cell(run, "blocks.0", LayerMetric::kGradNorm, 1);
  EXPECT_FALSE(sibling.has_nonfinite());
  EXPECT_EQ(sibling.max, 5.0f);
}

TEST(ModuleRollup, AnUnsafeStepSentPerLayerOutOfCadenceDoesNotShortenIt) {
  RunModel run("moe", 0, ModelConfig{});
  run.describe(description());
  EXPECT_EQ(layer_cadence(run), "per-layer values every few steps; modules every step");
  for (int64_t step = 0; step < 40; ++step) {
    const bool per_layer = step % 16 == 0 || step == 21;   // 21: a non-finite step, sent in full
    ASSERT_TRUE(run.add_step(per_layer ? layer_record(step, kLayers) : rollup_record(step, {1, 2, 3, 4, 5})));
  }
  EXPECT_EQ(run.layer_detail_every(), 16);
}

TEST(ModuleRollup, AWrongModuleCountIsRefusedAndTheStepKept) {
  Model model;
  model.ingest(description());
  model.ingest(layer_record(0, kLayers));
  model.ingest(rollup_record(1, {1, 2, 3, 4}));   // 4 modules, 5 described
  wire::StepRecord short_block = rollup_record(2, {1, 2, 3, 4, 5});
  short_block.module_values.resize(7);            // fewer values than 6 metrics x 5 modules
  model.ingest(short_block);
  model.ingest(rollup_record(3, {1, 2, 3, 4, 5}));
  const RunModel& run = model.run(0);
  EXPECT_EQ(run.counters().refused_rollups, 2u);
  EXPECT_EQ(model.counters().refused_rollups, 2u);
  EXPECT_EQ(run.counters().steps_stored, 4u) << "the record's own scalars are still the step's";
  EXPECT_FALSE(module_cell(run, "blocks.0.experts", LayerMetric::kGradNorm, 1).has_finite());
  EXPECT_FALSE(module_cell(run, "blocks.0.experts", LayerMetric::kGradNorm, 2).has_finite());
  EXPECT_EQ(module_cell(run, "blocks.0.experts", LayerMetric::kGradNorm, 3).max, 2.0f);
}

TEST(ModuleRollup, NamesTheTreeDoesNotHoldGiveNothing) {
  RunModel run("moe", 0, ModelConfig{});
  // "" (the model's own parameters), a name no layer has any more, a range past the layers.
  run.describe(description({{"", 0, 1}, {"gone.module", 1, 4}, {"blocks.0.norm", 5, 1}, {"blocks.1", 6, 5}}));
  ASSERT_TRUE(run.add_step(layer_record(0, kLayers)));
  wire::StepRecord record = rollup_record(1, {50, 40, 3, 4});
  ASSERT_TRUE(run.add_step(record));
  EXPECT_EQ(module_cell(run, "blocks.0", LayerMetric::kGradNorm, 1).max, 3.0f);
  EXPECT_EQ(module_cell(run, "blocks.1", LayerMetric::kGradNorm, 1).max, 4.0f);
  EXPECT_EQ(module_cell(run, "blocks", LayerMetric::kGradNorm, 1).max, 4.0f);
  EXPECT_FALSE(module_cell(run, "blocks.0.experts", LayerMetric::kGradNorm, 1).has_finite());
  EXPECT_EQ(run.counters().refused_rollups, 0u);
}

TEST(ModuleRollup, ARunNotDescribedWithModulesIgnoresThem) {
  Model model;
  wire::RunDescription narrow = description({});
  model.ingest(narrow);
  model.ingest(layer_record(0, kLayers));
  model.ingest(rollup_record(1, {1, 2, 3, 4, 5}));
  const RunModel& run = model.run(0);
  EXPECT_EQ(run.counters().refused_rollups, 1u);
  EXPECT_FALSE(run.keeps_module_series()) << "a narrow model keeps none";
  EXPECT_EQ(layer_cadence(run), "") << "sent per layer every step: nothing to say";
  EXPECT_EQ(run.counters().steps_stored, 2u);
}

}  // namespace
}  // namespace keel::app
