// The metric table's behaviour columns: what the probe, keel-cli and the dashboard derive from
// them must keep saying what they said when each view kept its own list.
#include <gtest/gtest.h>

#include <vector>

#include "keel/wire/layer_metrics.hpp"

namespace keel::wire {
namespace {

template <size_t N>
std::vector<LayerMetric> listed(const std::array<LayerMetric, N>& metrics) {
  return std::vector<LayerMetric>(metrics.begin(), metrics.end());
}

TEST(LayerMetricTable, EachViewShowsItsMetricsInItsOwnOrder) {
  using M = LayerMetric;
  EXPECT_EQ(listed(kListColumnMetrics),
            (std::vector<M>{M::kGradNorm, M::kUpdateRatio, M::kGradAbsmax, M::kGradZeroFrac, M::kGradNonfinite}));
  EXPECT_EQ(listed(kDetailPlotMetrics),
            (std::vector<M>{M::kGradNorm, M::kGradAbsmax, M::kUpdateRatio, M::kParamNorm, M::kGradZeroFrac}));
  EXPECT_EQ(listed(kHeatmapMetrics), (std::vector<M>{M::kGradNorm, M::kUpdateRatio, M::kGradAbsmax, M::kGradZeroFrac}));
}

// A count (printed as an integer, kept exact in a recording) is added up wherever values of
// several parts meet; no other metric is, so a module never hides its worst layer.
TEST(LayerMetricTable, ACountAndOnlyACountIsSummedOverShardsAndModules) {
  for (const LayerMetricInfo& info : kLayerMetrics) {
    const bool count = info.value == MetricValue::kCount;
    EXPECT_EQ(info.shards == ShardCombine::kSum, count) << info.name;
    EXPECT_EQ(info.modules == ModuleRollup::kSum, count) << info.name;
  }
  EXPECT_TRUE(is_count(LayerMetric::kGradNonfinite));
  EXPECT_FALSE(is_count(LayerMetric::kGradNorm));
}

// The update ratio's combine weighs each shard by its weights' norm: param_norm must be a
// metric measured whenever the update is.
TEST(LayerMetricTable, TheUpdateRatioCombinesWithTheWeightsNorm) {
  EXPECT_EQ(info_of(LayerMetric::kUpdateRatio).shards, ShardCombine::kUpdateOverWeights);
  EXPECT_EQ(info_of(LayerMetric::kParamNorm).shards, ShardCombine::kRootSumSquares);
  EXPECT_EQ(info_of(LayerMetric::kParamNorm).source, MetricSource::kWeights);
  for (const LayerMetricInfo& info : kLayerMetrics) {
    if (info.metric != LayerMetric::kUpdateRatio) {
      EXPECT_NE(info.shards, ShardCombine::kUpdateOverWeights) << info.name;
    }
  }
}

}  // namespace
}  // namespace keel::wire
