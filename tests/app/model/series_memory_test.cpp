// Memory stays bounded however long the run: per series, per run, and the stated numbers.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "model/run_model.hpp"
#include "model/series_history.hpp"

namespace keel::app {
namespace {

TEST(SeriesMemory, DefaultBoundIsUnderEightBytesPerRecentSample) {
  const ModelConfig config;
  const size_t bound = SeriesHistory::max_bytes(config);
  // 4 bytes per recent sample + the archive (9 bytes x 4/3 x 2048 buckets) + bookkeeping.
  EXPECT_LE(bound, 58u * 1024u);
  EXPECT_LE(static_cast<double>(bound) / static_cast<double>(config.recent_steps), 8.0);
}

TEST(SeriesMemory, LongRunStaysWithinBoundAndStopsGrowing) {
  const ModelConfig config;
  const size_t bound = SeriesHistory::max_bytes(config);
  std::vector<SeriesHistory> series;
  for (int i = 0; i < 4; ++i) series.emplace_back(0, config);
  size_t at_one_million = 0;
  for (int64_t step = 0; step < 2000000; ++step) {
    for (size_t i = 0; i < series.size(); ++i) {
      series[i].append(step, std::sin(static_cast<float>(step + static_cast<int64_t>(i))));
    }
    if ((step & 0xffff) == 0 || step == 1999999) {
      for (const SeriesHistory& s : series) ASSERT_LE(s.bytes_used(), bound) << "step " << step;
    }
    if (step == 1000000) at_one_million = series[0].bytes_used();
  }
  // Full: another million steps coarsen the archive but allocate nothing.
  EXPECT_EQ(series[0].bytes_used(), at_one_million);
  // And the bound is nearly reached, so it is a real statement about what is used.
  EXPECT_GE(series[0].bytes_used(), bound * 9 / 10);
}

TEST(SeriesMemory, GapsDoNotInflateMemory) {
  ModelConfig config;
  config.recent_steps = 256;
  config.archive_buckets = 64;
  SeriesHistory series(0, config);
  int64_t step = 0;
  for (int i = 0; i < 10000; ++i) {
    ASSERT_TRUE(series.append(step, 1.0f));
    step += 1 + (i % 100 == 0 ? 1000000 : 0);
  }
  EXPECT_LE(series.bytes_used(), SeriesHistory::max_bytes(config));
}

TEST(SeriesMemory, RunModelStaysWithinSeriesBound) {
  ModelConfig config;
  config.recent_steps = 256;
  config.archive_buckets = 64;
  RunModel run("run", 0, config);
  wire::RunDescription description;
  description.run_id = "run";
  for (int i = 0; i < 8; ++i) {
    description.layers.push_back({"l" + std::to_string(i), {4}, 4, "float32"});
  }
  description.watches = {"logits"};
  run.describe(description);

  wire::StepRecord record;
  record.layer_count = 8;
  record.layer_values.assign(8 * wire::kLayerMetricCount, 0.5f);
  record.scaler = wire::ScalerState{};
  record.watches.push_back({"logits", 1, 1, 1, 0});
  size_t at_half = 0;
  for (int64_t step = 0; step < 300000; ++step) {
    record.step = step;
    record.loss = static_cast<double>(step);
    ASSERT_TRUE(run.add_step(record));
    if (step == 150000) at_half = run.bytes_used();
  }
  EXPECT_EQ(run.series_count(),
            8u * wire::kLayerMetricCount + kGlobalSeriesCount + kWatchMetricCount);
  // Series at their bound, plus names, latest values and the description: a few KiB.
  EXPECT_LE(run.bytes_used(), run.series_count() * SeriesHistory::max_bytes(config) + 16 * 1024);
  EXPECT_EQ(run.bytes_used(), at_half);
}

}  // namespace
}  // namespace keel::app
