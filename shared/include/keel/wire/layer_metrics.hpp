// The per-layer metrics, defined once: their order on the wire, names and sources.
//
// What it is for: a step record packs one float block per metric (PROTOCOL §4), the probe
// decides which are due and which need a gradient, and the app names and styles them. Every
// one of those reads this table rather than an enum's order, a hand-written mask or a
// six-entry initialiser. A seventh metric is one row here, and a style row in the app
// (metric_styles.hpp asserts its size against kLayerMetricCount); the static_asserts below
// check this table's order and masks. The app's other lists of metrics (the layer list's
// columns, the detail plots, the heatmap's metric, the shard combine, the module rollup) are
// still written by hand, and a new metric is not shown there until it is added to each
// (issue 58).
// Definitions (DESIGN §2): grad_norm = sqrt(sum g^2) of the unscaled gradient; grad_absmax =
// max |g| (NaN if any NaN); grad_nonfinite = count of NaN/Inf; grad_zero_frac = fraction of
// elements exactly 0; param_norm = sqrt(sum w^2) before the update; update_ratio =
// norm(W_after - W_before) / norm(W_before), 0 when the update was skipped.
// Threads: constants. Never: allocates.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace keel::wire {

// In the order they are packed in a StepRecord's layer block.
enum class LayerMetric : uint8_t {
  kGradNorm = 0,
  kGradAbsmax = 1,
  kGradNonfinite = 2,
  kGradZeroFrac = 3,
  kParamNorm = 4,
  kUpdateRatio = 5,
};

// What a metric is measured from: a layer without a gradient (frozen, unused) has no sample of
// a gradient metric, but still of its weights.
enum class MetricSource : uint8_t {
  kGradient,   // the step's gradient, before the update
  kWeights,    // the weights before the update
  kUpdate,     // the weights before and after the update
};

struct LayerMetricInfo {
  LayerMetric metric;
  const char* name;    // snake case, as in JSON output and the run description
  const char* label;   // as the dashboard shows it
  MetricSource source;
};

inline constexpr LayerMetricInfo kLayerMetrics[] = {
    {LayerMetric::kGradNorm, "grad_norm", "grad norm", MetricSource::kGradient},
    {LayerMetric::kGradAbsmax, "grad_absmax", "grad absmax", MetricSource::kGradient},
    {LayerMetric::kGradNonfinite, "grad_nonfinite", "non-finite", MetricSource::kGradient},
    {LayerMetric::kGradZeroFrac, "grad_zero_frac", "zero fraction", MetricSource::kGradient},
    {LayerMetric::kParamNorm, "param_norm", "param norm", MetricSource::kWeights},
    {LayerMetric::kUpdateRatio, "update_ratio", "update ratio", MetricSource::kUpdate},
};
inline constexpr int kLayerMetricCount = static_cast<int>(std::size(kLayerMetrics));

namespace detail {
constexpr bool table_is_in_wire_order() {
  for (int i = 0; i < kLayerMetricCount; ++i) {
    if (static_cast<int>(kLayerMetrics[i].metric) != i) return false;
  }
  return true;
}
constexpr uint32_t mask_of(MetricSource source) {
  uint32_t mask = 0;
  for (int i = 0; i < kLayerMetricCount; ++i) {
    if (kLayerMetrics[i].source == source) mask |= 1u << i;
  }
  return mask;
}
}  // namespace detail

static_assert(detail::table_is_in_wire_order(), "kLayerMetrics must list the metrics in LayerMetric's order");
// The record's metric_mask and the probe's masks are 32 bits wide.
static_assert(kLayerMetricCount <= 32, "a metric mask holds at most 32 metrics");

inline constexpr uint32_t kAllLayerMetrics = (1u << kLayerMetricCount) - 1;
// The metrics read from the gradient: due only when a step has one to measure.
inline constexpr uint32_t kGradientMetrics = detail::mask_of(MetricSource::kGradient);
static_assert((kGradientMetrics | detail::mask_of(MetricSource::kWeights) | detail::mask_of(MetricSource::kUpdate)) ==
                  kAllLayerMetrics,
              "every metric has a source");

constexpr const LayerMetricInfo& info_of(LayerMetric metric) { return kLayerMetrics[static_cast<int>(metric)]; }
constexpr uint32_t bit_of(LayerMetric metric) { return 1u << static_cast<int>(metric); }
constexpr bool is_gradient_metric(LayerMetric metric) {
  return static_cast<int>(metric) < kLayerMetricCount && info_of(metric).source == MetricSource::kGradient;
}

// Every metric every step: the probe's default cadence, whatever the count.
constexpr std::array<int32_t, kLayerMetricCount> every_step_cadence() {
  std::array<int32_t, kLayerMetricCount> cadence{};
  for (int32_t& c : cadence) c = 1;
  return cadence;
}

}  // namespace keel::wire
