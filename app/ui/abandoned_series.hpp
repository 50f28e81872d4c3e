// keel app abandoned series: what a view draws greyed of a rewound run (RunModel::abandoned_spans()).
//
// What it is for: the charts, the layer plots and the heatmap show the steps a rewind left
// behind under the continuation that took their step numbers. These gather, for one series,
// the spans' copies of it, newest span first (where two spans cover one step, the newer is
// what the run did last there).
// Threads: the UI thread. Never: touches ImGui or allocates more than the list.
#pragma once

#include <cstddef>
#include <vector>

#include "model/run_model.hpp"

namespace keel::app::ui {

// A global series' copies in the abandoned spans that keep it, newest first.
std::vector<const SeriesHistory*> abandoned_global_series(const RunModel& run, GlobalSeries series);
// A layer's metric's copies in the spans that keep the run's layers, newest first.
std::vector<const SeriesHistory*> abandoned_layer_series(const RunModel& run, size_t layer, wire::LayerMetric metric);
// Fills each of `out[0 .. grid.columns())` that has no data from the newest of `spans` with data
// there (`scratch` is reused between calls).
void summarize_abandoned(const std::vector<const SeriesHistory*>& spans, const ColumnGrid& grid, Summary* out,
                         std::vector<Summary>& scratch);

}  // namespace keel::app::ui
