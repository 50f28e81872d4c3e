// AbandonedSpan: the steps a rewind left behind (docs/rewind.md), kept apart from the run's
// series so that the continuation can take their step numbers while views still show them,
// greyed.
//
// What it is for: after the probe rewinds from step N back to the snapshot of step S, its next
// records are numbered S, S+1, ... again. RunModel moves each series' samples of [S, N] here
// and truncates the series at S - 1 (SeriesHistory::drop_after()), so the continuation is
// stored as any record is.
// Memory: a span's series keep 16 recent steps and a pyramid of at most 2048 base buckets (one
// step each while the span is that short, so most spans are exact), narrowed until all of the
// span's series fit an equal part of ModelConfig::abandoned_share() (RunModel keeps at most
// RunModel::kMaxAbandonedSpans spans). A run too wide for even the smallest layer series there
// keeps its span's global series only (layers empty). Only the steps the live series still held
// at full resolution are copied: a span longer than a layer's recent window keeps its newest
// steps.
// Threads: a plain value, owned by RunModel (the UI thread).
// Never: allocates once built, or throws.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "keel/wire/layer_metrics.hpp"
#include "model/model_config.hpp"
#include "model/series_history.hpp"

namespace keel::app {

struct AbandonedSpan {
  int64_t first_step = 0;   // S: the step the run went back to, the continuation's first
  int64_t last_step = -1;   // the newest step stored before the rewind
  std::vector<SeriesHistory> global;   // by GlobalSeries
  // [metric][layer]; empty when the run's layers did not fit the span's share.
  std::array<std::vector<SeriesHistory>, wire::kLayerMetricCount> layers;

  size_t bytes_used() const;
  // Whether `step` lies in the span.
  bool holds(int64_t step) const { return step >= first_step && step <= last_step; }
};

// The config of one abandoned series for a span of `steps` steps, when `series` of them share
// `bytes`; the least config when even that does not fit (fits() then says so).
ModelConfig abandoned_series_config(int64_t steps, size_t series, size_t bytes);
// Whether `series` series of `config` fit in `bytes`.
bool abandoned_series_fit(const ModelConfig& config, size_t series, size_t bytes);
// A series of the span [first_step, last_step] holding `live`'s samples there (those still in
// its recent window).
SeriesHistory abandoned_copy(const SeriesHistory& live, int64_t first_step, int64_t last_step,
                             const ModelConfig& config);

}  // namespace keel::app
