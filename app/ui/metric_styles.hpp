// How the dashboard draws each per-layer metric: one row per wire metric (layer_metrics.hpp).
//
// What it is for: the layer list's columns and the detail pane's plots take their header,
// colour and scale from here, and the metric's name from the wire table. The static_assert
// below fails the build until a new metric has a style row; the columns and plots that show it
// are still listed by hand (layer_list.cpp, layer_detail.cpp).
// Threads: constants. Never: allocates.
#pragma once

#include <imgui.h>

#include <iterator>

#include "keel/wire/layer_metrics.hpp"

namespace keel::app::ui {

struct MetricStyle {
  const char* column;   // the layer list's header: short
  ImU32 colour;         // its line in the detail pane
  bool log_y;           // plotted on a log scale
};

// In wire order (wire::kLayerMetrics).
inline constexpr MetricStyle kMetricStyles[] = {
    {"grad norm", IM_COL32(120, 220, 140, 255), true},    // grad_norm
    {"absmax", IM_COL32(240, 120, 90, 255), true},        // grad_absmax
    {"non-finite", IM_COL32(255, 32, 64, 255), false},    // grad_nonfinite
    {"zeros", IM_COL32(200, 140, 255, 255), false},       // grad_zero_frac
    {"param norm", IM_COL32(230, 200, 90, 255), true},    // param_norm
    {"update", IM_COL32(90, 170, 255, 255), true},        // update_ratio
};
static_assert(std::size(kMetricStyles) == wire::kLayerMetricCount, "every layer metric needs a style");

inline const MetricStyle& style_of(wire::LayerMetric metric) { return kMetricStyles[static_cast<int>(metric)]; }

}  // namespace keel::app::ui
