// The model's memory budget and sane limits (issue 30): a wide run's layer series are sized to
// its share of the budget, however many steps come; event details and events are bounded by
// bytes; descriptions and records beyond the limits are refused, counted and said, never
// stored.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "model/model.hpp"

namespace keel::app {
namespace {

wire::RunDescription wide(size_t layers, int32_t rank = 0, int32_t world_size = 1) {
  wire::RunDescription d;
  d.run_id = "wide";
  d.seq = 1;
  d.rank = rank;
  d.world_size = world_size;
  d.start_unix_ms = 1000;
  for (size_t i = 0; i < layers; ++i) d.layers.push_back({"l" + std::to_string(i) + ".weight", {4}, 4, "float32"});
  return d;
}

wire::StepRecord record(size_t layers, int64_t step, int32_t rank = 0) {
  wire::StepRecord r;
  r.run = "wide";
  r.rank = rank;
  r.step = step;
  r.seq = static_cast<uint64_t>(step) + 2;
  r.layer_count = static_cast<uint32_t>(layers);
  r.layer_values.assign(layers * wire::kLayerMetricCount, 0.5f + 0.001f * static_cast<float>(step % 100));
  return r;
}

// A dense transformer of `blocks` blocks of four tensors (blocks.7.qkv.weight): a module per
// block, one above them, and no module folded by default up to 1,000 tensors.
wire::RunDescription transformer(size_t blocks) {
  wire::RunDescription d = wide(0);
  for (size_t b = 0; b < blocks; ++b) {
    for (const char* tensor : {"qkv", "proj", "fc1", "fc2"}) {
      d.layers.push_back({"blocks." + std::to_string(b) + "." + tensor + ".weight", {4}, 4, "float32"});
    }
  }
  return d;
}

// The module series of a model that does not fold cost its layers nothing: they keep as many
// full-resolution steps as before modules had series (1,000 tensors: 2,048; 288: the 8,192).
TEST(ModelBudget, ADenseModelsModulesCostItsLayersNoSteps) {
  for (const auto& [blocks, steps] : {std::pair<size_t, int64_t>{250, 2048}, {72, 8192}}) {
    Model model;
    model.ingest(transformer(blocks));
    model.ingest(record(blocks * 4, 0));
    const RunModel& run = model.run(0);
    ASSERT_EQ(run.modules().module_count(), blocks + 1);
    EXPECT_EQ(run.layer_recent_steps(), steps) << blocks * 4 << " tensors";
  }
}

// Past the fold threshold the modules keep series of their own, and layers and modules share
// the run's share: a 2,000-tensor transformer's 501 modules leave its layers 512 steps (1,024
// without them), and its folded rows one series query each.
TEST(ModelBudget, AModelThatFoldsKeepsModuleSeriesInsideItsShare) {
  Model model;
  const size_t blocks = 500;
  model.ingest(transformer(blocks));
  for (int64_t step = 0; step < 600; ++step) model.ingest(record(blocks * 4, step));
  const RunModel& run = model.run(0);
  EXPECT_TRUE(run.keeps_module_series());
  EXPECT_EQ(run.layer_recent_steps(), 512);
  EXPECT_FALSE(run.module_series(0, wire::LayerMetric::kGradNorm).empty());
  size_t series_bytes = 0;
  for (int m = 0; m < wire::kLayerMetricCount; ++m) {
    for (size_t i = 0; i < run.layer_count(); ++i) {
      series_bytes += run.layer_series(i, static_cast<wire::LayerMetric>(m)).bytes_used();
    }
    for (size_t i = 0; i < run.modules().module_count(); ++i) {
      series_bytes += run.module_series(i, static_cast<wire::LayerMetric>(m)).bytes_used();
    }
  }
  EXPECT_LE(series_bytes, ModelConfig{}.budget_share());
}

TEST(ModelBudget, ANarrowRunKeepsTheDefaultWindow) {
  Model model;
  model.ingest(wide(42));
  model.ingest(record(42, 0));
  EXPECT_EQ(model.run(0).layer_recent_steps(), ModelConfig{}.recent_steps);
}

TEST(ModelBudget, AWideRunsSeriesFitItsShareOfTheBudgetHoweverLongTheRun) {
  ModelConfig config;
  config.memory_budget = size_t{256} << 20;   // small, so the test's run is wide for it
  Model model(config);
  const size_t layers = 2000;
  model.ingest(wide(layers));
  for (int64_t step = 0; step < 20000; step += 7) model.ingest(record(layers, step));
  const RunModel& run = model.run(0);
  EXPECT_LT(run.layer_recent_steps(), config.recent_steps);
  size_t layer_bytes = 0;
  for (size_t i = 0; i < layers; ++i) {
    for (int m = 0; m < wire::kLayerMetricCount; ++m) {
      layer_bytes += run.layer_series(i, static_cast<wire::LayerMetric>(m)).bytes_used();
    }
  }
  EXPECT_LE(layer_bytes, config.budget_share());
  EXPECT_GT(layer_bytes, config.budget_share() / 4) << "the share is there to be used";
  // Older history is still there, as min and max: the first step's column is not empty.
  const std::vector<Column> first = run.layer_series(0, wire::LayerMetric::kGradNorm).columns(0, 0, 1);
  EXPECT_TRUE(first[0].value.has_data());
}

TEST(ModelBudget, ALongDetailIsCutAndEventsAreBoundedByBytes) {
  ModelConfig config;
  config.max_event_detail = 1000;
  config.max_event_bytes = 200000;
  Model model(config);
  model.ingest(wide(2));
  for (int i = 0; i < 1000; ++i) {
    wire::Event event;
    event.run = "wide";
    event.step = i;
    event.kind = "spike";
    // A multi-byte character across the cut: the kept detail is still whole characters.
    event.detail = std::string(999, 'x') + "\xc3\xa9" + std::string(60000, 'y');
    model.ingest(event);
  }
  const RunModel& run = model.run(0);
  ASSERT_FALSE(run.events().empty());
  const std::string& detail = run.events().front().detail;
  EXPECT_EQ(detail.substr(0, 999), std::string(999, 'x'));
  EXPECT_NE(detail.find("more bytes not kept]"), std::string::npos) << detail.substr(990);
  EXPECT_EQ(detail.find("\xc3\xa9"), std::string::npos) << "a character was cut in two";
  EXPECT_LT(run.events().size(), 1000u);
  EXPECT_GT(run.counters().events_evicted, 0u);
  EXPECT_EQ(run.counters().details_cut, 1000u);
  EXPECT_LE(run.bytes_used() - sizeof(RunModel), size_t{200000} + 200000);   // events + the rest, small
}

TEST(ModelBudget, WhatIsBeyondSaneLimitsIsRefusedCountedAndSaid) {
  Model model;
  model.ingest(wide(200001));
  EXPECT_EQ(model.run_count(), 0u);
  EXPECT_EQ(model.counters().refused_insane, 1u);
  EXPECT_NE(model.counters().last_refusal.find("200001 layers, more than the 100000"), std::string::npos)
      << model.counters().last_refusal;

  model.ingest(record(200001, 5));
  EXPECT_EQ(model.run_count(), 0u);
  model.ingest(wide(2, -2147483647 - 1));
  model.ingest(wide(2, 3, 2));   // rank 3 of a world of 2
  EXPECT_EQ(model.counters().refused_insane, 4u);
  EXPECT_EQ(model.run_count(), 0u);

  // A job of 2: its ranks are shown; records of rank 1,999 for it are refused.
  model.ingest(wide(2, 0, 2));
  model.ingest(record(2, 0, 0));
  model.ingest(record(2, 0, 1999));
  EXPECT_EQ(model.ranks(), std::vector<int32_t>{0});
  EXPECT_EQ(model.counters().refused_insane, 5u);
  EXPECT_NE(model.counters().last_refusal.find("rank 1999 of a world of 2"), std::string::npos)
      << model.counters().last_refusal;
}

}  // namespace
}  // namespace keel::app
