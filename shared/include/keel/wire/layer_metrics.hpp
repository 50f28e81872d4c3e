// The per-layer metrics, defined once: their order on the wire, names, what each is measured
// from, and how it behaves: how a sharded layer's shards combine, how a module rolls its layers
// up, whether it is a count, and where the dashboard shows it.
//
// What it is for: a step record packs one float block per metric (PROTOCOL §4), the probe
// decides which are due, which need a gradient and how a module's value is made, keel-cli
// prints counts as integers, and the app combines shards, folds modules and lays out its list
// columns, detail plots and heatmap choices. Each of those reads this table, never a list of
// its own. A new metric is a LayerMetric value and one row here (the constructor takes every
// column, so a row that forgets one does not compile), its value in the probe (layer_value in
// probe/src/step/step_record_builder.cpp, a switch without `default:` that -Werror=switch
// completes) and its colours in the app (ui/metric_styles.hpp, whose size is asserted against this table). A new
// kind of combine or rollup is a compile error in every switch that handles them. The
// static_asserts below check the table's order, masks and placements.
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

// How the values of one layer's shards (the ranks of a sharded job, each holding part of its
// elements) make the whole layer's, exactly.
enum class ShardCombine : uint8_t {
  kRootSumSquares,     // a norm: sqrt of the sum of the shards' squares
  kMax,                // the largest; NaN when any shard's is NaN
  kSum,                // a count
  kMeanByNumel,        // a fraction of the elements: the shards' weighted by their element counts
  kUpdateOverWeights,  // update_ratio: sqrt(sum (ratio * param_norm)^2 / sum param_norm^2)
};

// How a module's value comes from its layers' (PROTOCOL §3.3): its worst layer's, so that no
// module hides a bad layer behind good ones, or for a count the layers' sum.
enum class ModuleRollup : uint8_t {
  kWorst,   // the largest; NaN when any layer's is NaN
  kSum,
};

// A count is a whole number carried as float32: printed as an integer, never rounded.
enum class MetricValue : uint8_t {
  kMeasure,
  kCount,
};

// Where the dashboard shows a metric: its place (1, 2, ...) among the layer list's value
// columns, among the detail pane's plots, and among the heatmap's (and ranks strip's) choices;
// kNotShown where it is not shown. The places of one view are 1..n, each once.
inline constexpr int8_t kNotShown = 0;
struct MetricPlaces {
  int8_t list_column;
  int8_t detail_plot;
  int8_t heatmap;
};

struct LayerMetricInfo {
  LayerMetric metric;
  const char* name;    // snake case, as in JSON output and the run description
  const char* label;   // as the dashboard shows it
  MetricSource source;
  ShardCombine shards;
  ModuleRollup modules;
  MetricValue value;
  MetricPlaces shown;

  constexpr LayerMetricInfo(LayerMetric metric, const char* name, const char* label, MetricSource source,
                            ShardCombine shards, ModuleRollup modules, MetricValue value, MetricPlaces shown)
      : metric(metric), name(name), label(label), source(source), shards(shards), modules(modules), value(value),
        shown(shown) {}
};

// Places: {list column, detail plot, heatmap}. The non-finite count is the list's column and
// the heatmap's red, not a plot; the weights' norm is a plot only.
inline constexpr LayerMetricInfo kLayerMetrics[] = {
    {LayerMetric::kGradNorm, "grad_norm", "grad norm", MetricSource::kGradient, ShardCombine::kRootSumSquares,
     ModuleRollup::kWorst, MetricValue::kMeasure, {1, 1, 1}},
    {LayerMetric::kGradAbsmax, "grad_absmax", "grad absmax", MetricSource::kGradient, ShardCombine::kMax,
     ModuleRollup::kWorst, MetricValue::kMeasure, {3, 2, 3}},
    {LayerMetric::kGradNonfinite, "grad_nonfinite", "non-finite", MetricSource::kGradient, ShardCombine::kSum,
     ModuleRollup::kSum, MetricValue::kCount, {5, kNotShown, kNotShown}},
    {LayerMetric::kGradZeroFrac, "grad_zero_frac", "zero fraction", MetricSource::kGradient, ShardCombine::kMeanByNumel,
     ModuleRollup::kWorst, MetricValue::kMeasure, {4, 5, 4}},
    {LayerMetric::kParamNorm, "param_norm", "param norm", MetricSource::kWeights, ShardCombine::kRootSumSquares,
     ModuleRollup::kWorst, MetricValue::kMeasure, {kNotShown, 4, kNotShown}},
    {LayerMetric::kUpdateRatio, "update_ratio", "update ratio", MetricSource::kUpdate, ShardCombine::kUpdateOverWeights,
     ModuleRollup::kWorst, MetricValue::kMeasure, {2, 3, 2}},
};
inline constexpr int kLayerMetricCount = static_cast<int>(std::size(kLayerMetrics));

// The dashboard's views of the metrics (MetricPlaces).
enum class MetricView : uint8_t { kListColumn, kDetailPlot, kHeatmap };

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
constexpr int place_in(const LayerMetricInfo& info, MetricView view) {
  switch (view) {
    case MetricView::kListColumn: return info.shown.list_column;
    case MetricView::kDetailPlot: return info.shown.detail_plot;
    case MetricView::kHeatmap: return info.shown.heatmap;
  }
  return kNotShown;
}
constexpr int shown_count(MetricView view) {
  int count = 0;
  for (const LayerMetricInfo& info : kLayerMetrics) count += place_in(info, view) != kNotShown;
  return count;
}
// Each place 1..n of the view held by exactly one metric, none outside it.
constexpr bool places_are_dense(MetricView view) {
  const int n = shown_count(view);
  for (int place = 1; place <= n; ++place) {
    int holders = 0;
    for (const LayerMetricInfo& info : kLayerMetrics) holders += place_in(info, view) == place;
    if (holders != 1) return false;
  }
  for (const LayerMetricInfo& info : kLayerMetrics) {
    if (place_in(info, view) < 0 || place_in(info, view) > n) return false;
  }
  return true;
}
template <MetricView kView>
constexpr std::array<LayerMetric, shown_count(kView)> shown_in() {
  std::array<LayerMetric, shown_count(kView)> metrics{};
  for (const LayerMetricInfo& info : kLayerMetrics) {
    const int place = place_in(info, kView);
    if (place != kNotShown) metrics[place - 1] = info.metric;
  }
  return metrics;
}
}  // namespace detail

static_assert(detail::table_is_in_wire_order(), "kLayerMetrics must list the metrics in LayerMetric's order");
// The record's metric_mask and the probe's masks are 32 bits wide.
static_assert(kLayerMetricCount <= 32, "a metric mask holds at most 32 metrics");
static_assert(detail::places_are_dense(MetricView::kListColumn), "list columns must be placed 1..n, each once");
static_assert(detail::places_are_dense(MetricView::kDetailPlot), "detail plots must be placed 1..n, each once");
static_assert(detail::places_are_dense(MetricView::kHeatmap), "heatmap choices must be placed 1..n, each once");

inline constexpr uint32_t kAllLayerMetrics = (1u << kLayerMetricCount) - 1;
// The metrics read from the gradient: due only when a step has one to measure.
inline constexpr uint32_t kGradientMetrics = detail::mask_of(MetricSource::kGradient);
static_assert((kGradientMetrics | detail::mask_of(MetricSource::kWeights) | detail::mask_of(MetricSource::kUpdate)) ==
                  kAllLayerMetrics,
              "every metric has a source");

// In the order each view shows them.
inline constexpr auto kListColumnMetrics = detail::shown_in<MetricView::kListColumn>();
inline constexpr auto kDetailPlotMetrics = detail::shown_in<MetricView::kDetailPlot>();
inline constexpr auto kHeatmapMetrics = detail::shown_in<MetricView::kHeatmap>();

constexpr const LayerMetricInfo& info_of(LayerMetric metric) { return kLayerMetrics[static_cast<int>(metric)]; }
constexpr uint32_t bit_of(LayerMetric metric) { return 1u << static_cast<int>(metric); }
constexpr bool is_gradient_metric(LayerMetric metric) {
  return static_cast<int>(metric) < kLayerMetricCount && info_of(metric).source == MetricSource::kGradient;
}
constexpr bool is_count(LayerMetric metric) { return info_of(metric).value == MetricValue::kCount; }
constexpr bool shown_in_heatmap(LayerMetric metric) { return info_of(metric).shown.heatmap != kNotShown; }

// Every metric every step: the probe's default cadence, whatever the count.
constexpr std::array<int32_t, kLayerMetricCount> every_step_cadence() {
  std::array<int32_t, kLayerMetricCount> cadence{};
  for (int32_t& c : cadence) c = 1;
  return cadence;
}

}  // namespace keel::wire
