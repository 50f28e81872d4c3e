// RunModel: records become per-layer, global and watch series; latest values; counters for
// sequence gaps and duplicate steps; bounded events; the heatmap.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "keel/wire/vocabulary.hpp"
#include "model/run_model.hpp"

namespace keel::app {
namespace {

using wire::LayerMetric;

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

wire::RunDescription describe_layers(const std::string& run_id, int layers) {
  wire::RunDescription description;
  description.run_id = run_id;
  for (int i = 0; i < layers; ++i) {
    description.layers.push_back({"blocks." + std::to_string(i) + ".weight", {2, 2}, 4, "float32"});
  }
  description.watches = {"logits"};
  return description;
}

// A record whose value for (metric m, layer i) is 100 m + i + step / 1000, for the metrics
// in `mask`, packed metric-major as on the wire.
wire::StepRecord record_at(int64_t step, uint32_t layers, uint32_t mask = wire::kAllLayerMetrics) {
  wire::StepRecord record;
  record.step = step;
  record.seq = static_cast<uint64_t>(step);
  record.loss = 2.5;
  record.layer_count = layers;
  record.metric_mask = mask;
  for (int m = 0; m < wire::kLayerMetricCount; ++m) {
    if ((mask & (1u << m)) == 0) continue;
    for (uint32_t i = 0; i < layers; ++i) {
      record.layer_values.push_back(100.0f * m + static_cast<float>(i) +
                                    static_cast<float>(step) / 1000);
    }
  }
  return record;
}

TEST(RunModel, RecordsBecomePerLayerSeriesFollowingTheMask) {
  RunModel run("r", 0, ModelConfig{});
  run.describe(describe_layers("r", 3));
  const uint32_t mask = (1u << 0) | (1u << 4);  // grad_norm and param_norm only
  ASSERT_TRUE(run.add_step(record_at(10, 3, mask)));
  ASSERT_TRUE(run.add_step(record_at(11, 3)));

  float value = 0;
  ASSERT_TRUE(run.layer_series(2, LayerMetric::kParamNorm).value_at(10, &value));
  EXPECT_FLOAT_EQ(value, 400.0f + 2 + 0.010f);
  ASSERT_TRUE(run.layer_series(1, LayerMetric::kGradAbsmax).value_at(11, &value));
  EXPECT_FLOAT_EQ(value, 100.0f + 1 + 0.011f);
  EXPECT_FALSE(run.layer_series(1, LayerMetric::kGradAbsmax).value_at(10, &value))
      << "a metric absent from the mask is missing, not zero";
  EXPECT_FLOAT_EQ(run.latest(0, LayerMetric::kUpdateRatio), 500.0f + 0.011f);
  EXPECT_EQ(run.latest_step(0, LayerMetric::kUpdateRatio), 11);
  EXPECT_EQ(run.layer_name(1), "blocks.1.weight");
  EXPECT_EQ(run.first_step(), 10);
  EXPECT_EQ(run.last_step(), 11);
}

// A frozen layer's gradient metrics are "not measured", not zero: no sample at those steps
// (the heatmap and charts show a gap), its weight metrics kept, and its state as of the newest.
TEST(RunModel, AFrozenLayerHasNoGradientSamplesWhileFrozen) {
  RunModel run("r", 0, ModelConfig{});
  run.describe(describe_layers("r", 3));
  wire::StepRecord record = record_at(10, 3);
  record.frozen_layers = {1};
  ASSERT_TRUE(run.add_step(record));
  float value = 0;
  EXPECT_FALSE(run.layer_series(1, LayerMetric::kGradNorm).value_at(10, &value));
  EXPECT_FALSE(run.layer_series(1, LayerMetric::kGradZeroFrac).value_at(10, &value));
  EXPECT_TRUE(run.layer_series(1, LayerMetric::kParamNorm).value_at(10, &value));
  EXPECT_TRUE(run.layer_series(0, LayerMetric::kGradNorm).value_at(10, &value));
  EXPECT_EQ(run.gradient_state(1), GradientState::kFrozen);
  EXPECT_EQ(run.gradient_state(0), GradientState::kMeasured);

  ASSERT_TRUE(run.add_step(record_at(11, 3)));   // unfrozen
  EXPECT_EQ(run.gradient_state(1), GradientState::kMeasured);
  ASSERT_TRUE(run.layer_series(1, LayerMetric::kGradNorm).value_at(11, &value));
  EXPECT_FLOAT_EQ(value, 1.0f + 0.011f);
}

// An unused layer (no gradient from that step's backward) is shown the same way: a gap in its
// gradient metrics for the steps it sat out, its weight metrics kept, and the reason named.
TEST(RunModel, AnUnusedLayerHasNoGradientSamplesForTheStepsItSatOut) {
  RunModel run("r", 0, ModelConfig{});
  run.describe(describe_layers("r", 3));
  wire::StepRecord record = record_at(10, 3);
  record.unused_layers = {2};
  ASSERT_TRUE(run.add_step(record));
  float value = 0;
  EXPECT_FALSE(run.layer_series(2, LayerMetric::kGradNorm).value_at(10, &value));
  EXPECT_FALSE(run.layer_series(2, LayerMetric::kGradZeroFrac).value_at(10, &value));
  EXPECT_TRUE(run.layer_series(2, LayerMetric::kParamNorm).value_at(10, &value));
  EXPECT_EQ(run.gradient_state(2), GradientState::kUnused);
  EXPECT_STREQ(gradient_state_name(run.gradient_state(2)), "unused");
  EXPECT_EQ(run.gradient_state(1), GradientState::kMeasured);

  ASSERT_TRUE(run.add_step(record_at(11, 3)));   // used again
  EXPECT_EQ(run.gradient_state(2), GradientState::kMeasured);
  EXPECT_TRUE(run.layer_series(2, LayerMetric::kGradNorm).value_at(11, &value));
}

TEST(RunModel, RecordsBeforeTheDescriptionAreKeptAndNamedLater) {
  RunModel run("", 0, ModelConfig{});
  ASSERT_TRUE(run.add_step(record_at(0, 2)));
  ASSERT_EQ(run.layer_count(), 2u);
  EXPECT_EQ(run.layer_name(1), "layer 1");
  run.describe(describe_layers("abc", 2));
  EXPECT_EQ(run.run_id(), "abc");
  EXPECT_EQ(run.layer_name(1), "blocks.1.weight");
  float value = 0;
  EXPECT_TRUE(run.layer_series(1, LayerMetric::kGradNorm).value_at(0, &value));
}

// Once described, a record with another layer count is another layout's values by index:
// refused and counted rather than grown into "layer <i>" or stored under the run's names.
TEST(RunModel, ADescribedRunRefusesARecordOfAnotherLayerCount) {
  RunModel run("r", 0, ModelConfig{});
  run.describe(describe_layers("r", 2));
  ASSERT_TRUE(run.add_step(record_at(0, 2)));
  EXPECT_FALSE(run.add_step(record_at(1, 4)));
  EXPECT_FALSE(run.add_step(record_at(2, 1)));
  EXPECT_EQ(run.counters().refused_records, 2u);
  EXPECT_EQ(run.counters().steps_stored, 1u);
  EXPECT_EQ(run.layer_count(), 2u);
  EXPECT_EQ(run.last_step(), 0);
  float value = 0;
  EXPECT_FALSE(run.layer_series(0, LayerMetric::kGradNorm).value_at(2, &value));
  ASSERT_TRUE(run.add_step(record_at(3, 2)));
  EXPECT_EQ(run.last_step(), 3);
}

// The probe re-describes the run when the model's parameters change (a head replaced, a
// parameter added): layers are re-planned in the model's new order. Each layer's history
// follows its name; a new layer starts empty; one no longer described is gone.
TEST(RunModel, ARedescribedLayoutKeepsEachLayersHistoryUnderItsName) {
  RunModel run("r", 0, ModelConfig{});
  run.describe(describe_layers("r", 3));   // blocks.0, blocks.1, blocks.2
  ASSERT_TRUE(run.add_step(record_at(0, 3)));
  ASSERT_TRUE(run.add_step(record_at(1, 3)));

  wire::RunDescription relaid = describe_layers("r", 3);
  relaid.layers.erase(relaid.layers.begin() + 1);                                  // blocks.1 removed
  relaid.layers.insert(relaid.layers.begin(), {"temperature", {1}, 1, "float32"});  // added first
  run.describe(relaid);   // temperature, blocks.0, blocks.2
  ASSERT_EQ(run.layer_count(), 3u);
  EXPECT_EQ(run.layer_name(0), "temperature");
  EXPECT_EQ(run.layer_name(2), "blocks.2.weight");
  float value = 0;
  EXPECT_FALSE(run.layer_series(0, LayerMetric::kGradNorm).value_at(1, &value)) << "a new layer starts empty";
  EXPECT_TRUE(std::isnan(run.latest(0, LayerMetric::kGradNorm)));
  ASSERT_TRUE(run.layer_series(2, LayerMetric::kGradNorm).value_at(1, &value));
  EXPECT_FLOAT_EQ(value, 2.0f + 0.001f) << "blocks.2 kept its history at its new index";
  EXPECT_FLOAT_EQ(run.latest(1, LayerMetric::kParamNorm), 400.0f + 0 + 0.001f);
  EXPECT_EQ(run.latest_step(2, LayerMetric::kGradNorm), 1);

  ASSERT_TRUE(run.add_step(record_at(2, 3)));   // the new layout's record
  ASSERT_TRUE(run.layer_series(0, LayerMetric::kGradNorm).value_at(2, &value));
  EXPECT_FLOAT_EQ(value, 0.0f + 0.002f);
  ASSERT_TRUE(run.layer_series(2, LayerMetric::kGradNorm).value_at(2, &value));
  EXPECT_FLOAT_EQ(value, 2.0f + 0.002f);
  ASSERT_TRUE(run.layer_series(2, LayerMetric::kGradNorm).value_at(0, &value));
  EXPECT_FLOAT_EQ(value, 2.0f + 0.000f);
}

TEST(RunModel, ALayersAliasesComeFromTheDescription) {
  RunModel run("r", 0, ModelConfig{});
  wire::RunDescription description = describe_layers("r", 2);
  description.layers[1].aliases = {"head.weight"};
  run.describe(description);
  EXPECT_TRUE(run.layer_aliases(0).empty());
  EXPECT_EQ(run.layer_aliases(1), std::vector<std::string>{"head.weight"});
  EXPECT_TRUE(run.layer_aliases(5).empty());
}

// The buffers' chart: the largest max |b| of the step's buffers, NaN when one is NaN, and no
// sample from a block that does not match the described buffers.
TEST(RunModel, BufferAbsmaxIsTheLargestAndKeepsNonFiniteValues) {
  RunModel run("r", 0, ModelConfig{});
  wire::RunDescription description = describe_layers("r", 1);
  description.buffers = {"bn.running_mean", "bn.running_var"};
  run.describe(description);
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<std::vector<float>> blocks = {{0.5f, 3.0f}, {4e28f, inf}, {inf, kNan}, {1.0f, 2.0f, 3.0f}, {}};
  for (size_t i = 0; i < blocks.size(); ++i) {
    wire::StepRecord record = record_at(static_cast<int64_t>(i), 1);
    record.buffer_absmax = blocks[i];
    ASSERT_TRUE(run.add_step(record));
  }
  const SeriesHistory& buffers = run.global_series(GlobalSeries::kBufferAbsmax);
  float value = 0;
  ASSERT_TRUE(buffers.value_at(0, &value));
  EXPECT_EQ(value, 3.0f);
  ASSERT_TRUE(buffers.value_at(1, &value));
  EXPECT_EQ(value, inf);
  ASSERT_TRUE(buffers.value_at(2, &value));
  EXPECT_TRUE(std::isnan(value)) << "NaN wins over Inf wherever it is";
  EXPECT_FALSE(buffers.value_at(3, &value)) << "three values for two described buffers";
  EXPECT_FALSE(buffers.value_at(4, &value)) << "not measured";
}

TEST(RunModel, GlobalAndWatchSeries) {
  RunModel run("r", 0, ModelConfig{});
  run.describe(describe_layers("r", 1));
  wire::StepRecord record = record_at(5, 1);
  record.skipped = true;
  record.loss = std::numeric_limits<double>::quiet_NaN();
  record.watches.push_back({"logits", 30.0f, 2.0f, 4.0f, 0});
  record.watches.push_back({"attn.scores", 7.0f, 1.0f, 0.0f, 3});
  ASSERT_TRUE(run.add_step(record));
  record = record_at(6, 1);
  record.scaler = wire::ScalerState{65536.0, 0, false, 0};
  ASSERT_TRUE(run.add_step(record));

  float value = 0;
  ASSERT_TRUE(run.global_series(GlobalSeries::kSkipped).value_at(5, &value));
  EXPECT_EQ(value, 1.0f);
  ASSERT_TRUE(run.global_series(GlobalSeries::kSkipped).value_at(6, &value));
  EXPECT_EQ(value, 0.0f);
  EXPECT_TRUE(run.global_series(GlobalSeries::kLoss).columns(5, 6, 1).front().value.has_nan());
  EXPECT_FALSE(run.global_series(GlobalSeries::kLossScale).value_at(5, &value));
  ASSERT_TRUE(run.global_series(GlobalSeries::kLossScale).value_at(6, &value));
  EXPECT_EQ(value, 65536.0f);
  EXPECT_TRUE(run.latest_step().has_scaler);

  ASSERT_EQ(run.watch_count(), 2u);
  EXPECT_EQ(run.watch_name(0), "logits");
  EXPECT_EQ(run.watch_name(1), "attn.scores");
  ASSERT_TRUE(run.watch_series(0, WatchMetric::kAbsmax).value_at(5, &value));
  EXPECT_EQ(value, 30.0f);
  ASSERT_TRUE(run.watch_series(1, WatchMetric::kNonfinite).value_at(5, &value));
  EXPECT_EQ(value, 3.0f);
}

TEST(RunModel, DuplicateAndLateStepsAreCountedNotStored) {
  RunModel run("r", 0, ModelConfig{});
  ASSERT_TRUE(run.add_step(record_at(10, 1)));
  wire::StepRecord again = record_at(10, 1);
  again.layer_values[0] = 999.0f;
  EXPECT_FALSE(run.add_step(again));
  EXPECT_FALSE(run.add_step(record_at(7, 1)));
  EXPECT_EQ(run.counters().duplicate_steps, 2u);
  EXPECT_EQ(run.counters().steps_stored, 1u);
  EXPECT_NE(run.latest(0, LayerMetric::kGradNorm), 999.0f);
  EXPECT_EQ(run.layer_series(0, LayerMetric::kGradNorm).columns(0, 20, 1).front().value.max,
            record_at(10, 1).layer_values[0]);
}

TEST(RunModel, SequenceGapsAreCounted) {
  RunModel run("r", 0, ModelConfig{});
  for (uint64_t seq : {1u, 2u, 3u, 7u, 8u, 20u}) run.note_seq(seq, false);
  EXPECT_EQ(run.counters().messages, 6u);
  EXPECT_EQ(run.counters().seq_gaps, 2u);
  EXPECT_EQ(run.counters().seq_missing, 3u + 11u);
  run.note_seq(5, false);  // a replayed record
  EXPECT_EQ(run.counters().seq_rewinds, 1u);
  EXPECT_EQ(run.counters().seq_gaps, 2u);
  // A probe restart: its description comes first with a low seq, and counting resumes there.
  run.note_seq(0, true);
  run.note_seq(1, false);
  run.note_seq(2, false);
  EXPECT_EQ(run.counters().seq_rewinds, 1u);
  EXPECT_EQ(run.counters().seq_gaps, 2u);
}

// The probe's cumulative counts (drops, its own failures) are its newest record's.
TEST(RunModel, ProbeCountsComeFromTheNewestRecord) {
  RunModel run("r", 0, ModelConfig{});
  wire::StepRecord record = record_at(1, 1);
  record.dropped = 4;
  record.probe_errors = 1;
  run.add_step(record);
  record = record_at(2, 1);
  record.dropped = 9;
  record.probe_errors = 3;
  run.add_step(record);
  EXPECT_EQ(run.counters().probe_dropped, 9u);
  EXPECT_EQ(run.counters().probe_errors, 3u);
}

TEST(RunModel, EventsAreNewestFirstAndBounded) {
  ModelConfig config;
  config.max_events = 3;
  RunModel run("r", 0, config);
  for (int i = 0; i < 5; ++i) {
    wire::Event event;
    event.step = i;
    event.kind = "spike";
    run.add_event(event);
  }
  ASSERT_EQ(run.events().size(), 3u);
  EXPECT_EQ(run.events()[0].step, 4);
  EXPECT_EQ(run.events()[1].step, 3);
  EXPECT_EQ(run.events()[2].step, 2);
  EXPECT_EQ(run.counters().events_evicted, 2u);
}

wire::Event warning_at(int64_t step, uint64_t seq, int64_t stamp, const std::string& signal) {
  wire::Event event;
  event.step = step;
  event.seq = seq;
  event.stamp_unix_ns = stamp;
  event.kind = wire::event_kind::kWarning;
  event.warning = wire::Warning{signal, 2.0, 1.0, 0.05, 20, "lower the learning rate"};
  return event;
}

// The banner's warning outlives the bounded list, and a warning replayed late (a history
// reply: stamped earlier) does not replace the newest.
TEST(RunModel, TheNewestWarningIsKeptApartFromTheBoundedEvents) {
  ModelConfig config;
  config.max_events = 2;
  RunModel run("r", 0, config);
  EXPECT_FALSE(run.newest_warning());
  run.add_event(warning_at(100, 10, 5000, "grad_norm"));
  run.add_event(warning_at(150, 11, 6000, "update_ratio"));
  run.add_event(warning_at(90, 3, 4000, "logit_max"));   // replayed
  for (int i = 0; i < 5; ++i) {
    wire::Event skip;
    skip.step = 200 + i;
    skip.kind = "skip";
    run.add_event(skip);
  }
  ASSERT_TRUE(run.newest_warning());
  EXPECT_EQ(run.newest_warning()->step, 150);
  EXPECT_EQ(run.newest_warning()->warning->signal, "update_ratio");
  run.add_event(warning_at(160, 12, 6000, "log_z"));   // the same stamp, sent after
  EXPECT_EQ(run.newest_warning()->warning->signal, "log_z");
}

// A warning's advice is the publisher's text like a detail: cut past max_event_detail and
// counted in the events' bytes, so no publisher can grow the events past their budget with it.
TEST(RunModel, AWarningsAdviceIsCutAndCountedLikeADetail) {
  ModelConfig config;
  config.max_event_detail = 100;
  config.max_event_bytes = 64 << 10;
  RunModel run("r", 0, config);
  for (int i = 0; i < 50; ++i) {
    wire::Event event = warning_at(i, uint64_t(i), i, "grad_norm");
    event.warning->advice = std::string(60000, 'a');
    run.add_event(event);
  }
  ASSERT_TRUE(run.newest_warning());
  EXPECT_LT(run.newest_warning()->warning->advice.size(), 200u);
  EXPECT_NE(run.newest_warning()->warning->advice.find("more bytes not kept]"), std::string::npos);
  EXPECT_EQ(run.counters().details_cut, 50u);
  ModelConfig uncut = config;
  uncut.max_event_detail = size_t{1} << 20;
  RunModel whole("r", 0, uncut);
  for (int i = 0; i < 50; ++i) {
    wire::Event event = warning_at(i, uint64_t(i), i, "grad_norm");
    event.warning->advice = std::string(60000, 'a');
    whole.add_event(event);
  }
  EXPECT_EQ(whole.events().size(), 1u) << "60 KB of advice each: the 64 KB of events hold one";
}

TEST(RunModel, HeatmapRowsAreEachLayersColumns) {
  ModelConfig config;
  config.recent_steps = 64;
  config.archive_buckets = 32;
  RunModel run("r", 0, config);
  run.describe(describe_layers("r", 5));
  for (int64_t step = 0; step < 5000; ++step) {
    wire::StepRecord record = record_at(step, 5);
    if (step == 1234) record.layer_values[3] = kNan;  // grad_norm of layer 3
    ASSERT_TRUE(run.add_step(record));
  }
  for (int columns : {10, 700}) {
    const ColumnGrid grid(0, 4999, columns);
    std::vector<Summary> cells;
    run.heatmap(LayerMetric::kGradNorm, 1, 3, grid, cells);
    ASSERT_EQ(cells.size(), 3u * static_cast<size_t>(columns));
    int nan_cells = 0;
    for (size_t row = 0; row < 3; ++row) {
      std::vector<Column> expected;
      run.layer_series(1 + row, LayerMetric::kGradNorm).columns(grid, expected);
      for (int c = 0; c < columns; ++c) {
        const Summary& cell = cells[row * static_cast<size_t>(columns) + static_cast<size_t>(c)];
        EXPECT_EQ(cell.min, expected[static_cast<size_t>(c)].value.min);
        EXPECT_EQ(cell.max, expected[static_cast<size_t>(c)].value.max);
        EXPECT_EQ(cell.flags, expected[static_cast<size_t>(c)].value.flags);
        nan_cells += cell.has_nan() ? 1 : 0;
        if (cell.has_nan()) {
          EXPECT_EQ(row, 2u) << "only layer 3 had a NaN";
        }
      }
    }
    EXPECT_GE(nan_cells, 1) << columns;
  }
  // Rows past the last layer are not invented.
  std::vector<Summary> cells;
  run.heatmap(LayerMetric::kGradNorm, 4, 10, ColumnGrid(0, 10, 4), cells);
  EXPECT_EQ(cells.size(), 4u);
}

TEST(RunModel, StepsPerSecondFromProbeStamps) {
  RunModel run("r", 0, ModelConfig{});
  for (int64_t step = 0; step < 11; ++step) {
    wire::StepRecord record = record_at(step, 1);
    record.stamp_unix_ns = 1'000'000'000 + step * 50'000'000;  // 20 steps/s
    run.add_step(record);
  }
  EXPECT_NEAR(run.steps_per_second(), 20.0, 1e-9);
}

}  // namespace
}  // namespace keel::app
