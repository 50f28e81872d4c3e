// How the dashboard draws each per-layer metric: one row per wire metric (layer_metrics.hpp).
//
// What it is for: the layer list's columns and the detail pane's plots take their header,
// colour and scale from here; which metrics each view shows, in what order, and their names
// come from the wire table (wire::kListColumnMetrics, kDetailPlotMetrics, kHeatmapMetrics). The
// static_asserts below fail the build until a new metric has a style row, in wire order.
// Threads: constants. Never: allocates.
#pragma once

#include <imgui.h>

#include <iterator>

#include "keel/wire/layer_metrics.hpp"

namespace keel::app::ui {

struct MetricStyle {
  wire::LayerMetric metric;
  const char* column;   // the layer list's header: short
  ImU32 colour;         // its line in the detail pane
  bool log_y;           // plotted on a log scale
  // A list column that starts hidden (a right click on the header shows it): at the default
  // width the names had 30 px ("wei", "bia") with every column shown.
  bool column_starts_hidden;
};

// In wire order (wire::kLayerMetrics).
inline constexpr MetricStyle kMetricStyles[] = {
    {wire::LayerMetric::kGradNorm, "grad norm", IM_COL32(120, 220, 140, 255), true, false},
    {wire::LayerMetric::kGradAbsmax, "absmax", IM_COL32(240, 120, 90, 255), true, true},
    {wire::LayerMetric::kGradNonfinite, "non-finite", IM_COL32(255, 32, 64, 255), false, false},
    {wire::LayerMetric::kGradZeroFrac, "zeros", IM_COL32(200, 140, 255, 255), false, true},
    {wire::LayerMetric::kParamNorm, "param norm", IM_COL32(230, 200, 90, 255), true, false},
    {wire::LayerMetric::kUpdateRatio, "update", IM_COL32(90, 170, 255, 255), true, false},
};
static_assert(std::size(kMetricStyles) == wire::kLayerMetricCount, "every layer metric needs a style");

namespace detail {
constexpr bool styles_are_in_wire_order() {
  for (int i = 0; i < wire::kLayerMetricCount; ++i) {
    if (static_cast<int>(kMetricStyles[i].metric) != i) return false;
  }
  return true;
}
}  // namespace detail
static_assert(detail::styles_are_in_wire_order(), "kMetricStyles must list the metrics in LayerMetric's order");

inline const MetricStyle& style_of(wire::LayerMetric metric) { return kMetricStyles[static_cast<int>(metric)]; }

}  // namespace keel::app::ui
