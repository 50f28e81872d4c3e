// Metric names and the metric-major layer block accessors.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>

#include "keel/wire/messages.hpp"

namespace keel::wire {
namespace {

TEST(LayerMetricName, NamesEveryMetric) {
  EXPECT_STREQ(layer_metric_name(LayerMetric::kGradNorm), "grad_norm");
  EXPECT_STREQ(layer_metric_name(LayerMetric::kGradAbsmax), "grad_absmax");
  EXPECT_STREQ(layer_metric_name(LayerMetric::kGradNonfinite), "grad_nonfinite");
  EXPECT_STREQ(layer_metric_name(LayerMetric::kGradZeroFrac), "grad_zero_frac");
  EXPECT_STREQ(layer_metric_name(LayerMetric::kParamNorm), "param_norm");
  EXPECT_STREQ(layer_metric_name(LayerMetric::kUpdateRatio), "update_ratio");
  EXPECT_STREQ(layer_metric_name(static_cast<LayerMetric>(200)), "unknown");
}

// The wire's metric set as PROTOCOL §4 fixes it: what the table derives must keep saying so.
TEST(LayerMetricTable, DerivesTheProtocolsMasksAndADefaultForEveryMetric) {
  EXPECT_EQ(kLayerMetricCount, 6);
  EXPECT_EQ(kAllLayerMetrics, 0x3Fu);
  // grad norm, absmax, non-finite count and zero fraction need a gradient; the weights' do not.
  EXPECT_EQ(kGradientMetrics, 0x0Fu);
  std::set<std::string> names;
  for (int m = 0; m < kLayerMetricCount; ++m) {
    const LayerMetric metric = static_cast<LayerMetric>(m);
    EXPECT_EQ(is_gradient_metric(metric), (kGradientMetrics & bit_of(metric)) != 0) << m;
    names.insert(info_of(metric).name);
  }
  EXPECT_EQ(names.size(), size_t(kLayerMetricCount)) << "two metrics share a name";
  EXPECT_FALSE(is_gradient_metric(static_cast<LayerMetric>(200)));
  for (const int32_t every : every_step_cadence()) EXPECT_EQ(every, 1);
}

StepRecord two_layers_three_metrics() {
  StepRecord s;
  s.metric_mask = (1u << 1) | (1u << 3) | (1u << 4);  // absmax, zero_frac, param_norm
  s.layer_count = 2;
  s.layer_values = {10, 11, 30, 31, 40, 41};
  return s;
}

TEST(StepRecordBlocks, BlockIndexCountsPresentMetricsBelow) {
  const StepRecord s = two_layers_three_metrics();
  EXPECT_EQ(s.metric_block(LayerMetric::kGradNorm), -1);
  EXPECT_EQ(s.metric_block(LayerMetric::kGradAbsmax), 0);
  EXPECT_EQ(s.metric_block(LayerMetric::kGradNonfinite), -1);
  EXPECT_EQ(s.metric_block(LayerMetric::kGradZeroFrac), 1);
  EXPECT_EQ(s.metric_block(LayerMetric::kParamNorm), 2);
  EXPECT_EQ(s.metric_block(LayerMetric::kUpdateRatio), -1);
}

TEST(StepRecordBlocks, AllMetricsByDefault) {
  const StepRecord s;
  for (int m = 0; m < kLayerMetricCount; ++m) {
    EXPECT_EQ(s.metric_block(static_cast<LayerMetric>(m)), m);
  }
}

TEST(StepRecordBlocks, ValuesAreMetricMajor) {
  const StepRecord s = two_layers_three_metrics();
  EXPECT_EQ(s.layer_value(LayerMetric::kGradAbsmax, 0), 10);
  EXPECT_EQ(s.layer_value(LayerMetric::kGradAbsmax, 1), 11);
  EXPECT_EQ(s.layer_value(LayerMetric::kGradZeroFrac, 1), 31);
  EXPECT_EQ(s.layer_value(LayerMetric::kParamNorm, 0), 40);
}

TEST(StepRecordBlocks, AbsentOrOutOfRangeIsNaN) {
  StepRecord s = two_layers_three_metrics();
  EXPECT_TRUE(std::isnan(s.layer_value(LayerMetric::kGradNorm, 0)));
  EXPECT_TRUE(std::isnan(s.layer_value(LayerMetric::kParamNorm, 2)));
  EXPECT_TRUE(std::isnan(s.layer_value(static_cast<LayerMetric>(40), 0)));
  s.layer_values.resize(5);  // disagrees with its mask: never read past the end
  EXPECT_TRUE(std::isnan(s.layer_value(LayerMetric::kParamNorm, 1)));
  EXPECT_EQ(s.layer_value(LayerMetric::kParamNorm, 0), 40);
}

}  // namespace
}  // namespace keel::wire
