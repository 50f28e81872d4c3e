// Compiled, never linked, by the LayerMetricTable.*Row* tests (tests/shared/CMakeLists.txt): a
// row of the metric table with every behaviour column compiles; the same row without its
// placements (KEEL_ROW_WITHOUT_PLACES) must not, so a new metric cannot silently take a default
// behaviour.
#include "keel/wire/layer_metrics.hpp"

namespace wire = keel::wire;

#ifndef KEEL_ROW_WITHOUT_PLACES
constexpr wire::LayerMetricInfo kRow{wire::LayerMetric::kGradNorm, "grad_norm", "grad norm",
                                     wire::MetricSource::kGradient, wire::ShardCombine::kRootSumSquares,
                                     wire::ModuleRollup::kWorst, wire::MetricValue::kMeasure,
                                     {wire::kNotShown, wire::kNotShown, wire::kNotShown}};
#else
constexpr wire::LayerMetricInfo kRow{wire::LayerMetric::kGradNorm, "grad_norm", "grad norm",
                                     wire::MetricSource::kGradient, wire::ShardCombine::kRootSumSquares,
                                     wire::ModuleRollup::kWorst, wire::MetricValue::kMeasure};
#endif
static_assert(kRow.metric == wire::LayerMetric::kGradNorm, "the row is what it was given");
