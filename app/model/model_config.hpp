// ModelConfig: the memory budget of the dashboard's model.
//
// What it is for: sizing every series the model keeps. Each series holds its last
// `recent_steps` steps at full resolution (4 bytes a sample) plus a min/max pyramid over its
// whole history whose base level never exceeds `archive_buckets` buckets (9 bytes a bucket,
// levels of 4x above it: at most 4/3 * archive_buckets buckets in all). So one series never
// uses more than SeriesHistory::max_bytes(config), however long the run (see
// series_history.hpp for the numbers), and a model never holds more than `max_runs` runs.
// With the defaults a series is at most 58,010 bytes. A run's layer series are sized when its
// layers are known, so that they fit the run's share of `memory_budget` (budget_share()): a
// model of up to 289 layers keeps the defaults; a wider one keeps fewer recent steps at full
// resolution (older history stays in the min/max pyramid), down to the smallest series (16
// recent steps, 8 buckets, 442 bytes). A 1,000-layer model keeps 2,048 recent steps. Only a
// model that starts folded (more than 1,000 layers, module_tree.hpp) keeps module series
// (RunModel, one per module and metric, sized like a layer's; never more modules than layers),
// and they share the run's share with its layers (a 2,000-tensor transformer's layers keep 512
// steps, 1,024 without); a smaller model's modules cost its layers no steps, their rows being
// merged from the layers when shown. 100,000 layers (max_layers) take about 270 MB at the
// smallest, their modules at most as much again (a mixture of experts' 50,000 tensors have
// 16,754 modules).
// Messages beyond sane limits (max_layers, ranks outside [0, max_ranks) or outside their run's
// world_size) are refused and counted, never stored (Model::ingest).
// Threads: a plain value.
// Never: validated by throwing; the store rounds sizes up to powers of two and clamps them to
// the documented ranges.
#pragma once

#include <cstddef>
#include <cstdint>

namespace keel::app {

struct ModelConfig {
  // Full-resolution window per series, in steps. Rounded up to a power of two, clamped to
  // [16, 1 << 24]. Default: 32 KiB per series.
  int64_t recent_steps = 8192;
  // Budget of the pyramid's base level, in buckets. Rounded up to a power of two, clamped to
  // [8, 1 << 24]. When the run outgrows it, bucket width doubles (pairs merge). It should be
  // at least the widest plot in pixels so a whole-run view still has one bucket per column.
  int64_t archive_buckets = 2048;
  // Events kept per run (newest first); older ones are dropped and counted.
  size_t max_events = 1000;
  // Command acknowledgements kept by the model (newest first).
  size_t max_acks = 256;
  // Runs kept: when one more starts, the oldest run that no rank is streaming is dropped.
  size_t max_runs = 8;
  // What the model may hold (`keel --memory-budget`): three quarters go to the runs' series,
  // max_runs shares of it; the rest is for events, descriptions and the app around the model.
  size_t memory_budget = size_t{1} << 30;
  // The most layers one run may have (50,000 tensors of a mixture-of-experts model with room
  // to spare); a description or record with more is refused.
  size_t max_layers = 100000;
  // Ranks are 0 to max_ranks - 1; a message of another rank is refused.
  int32_t max_ranks = 4096;
  // An event's detail (and a warning's advice) is cut past this many bytes (the cut is said at
  // its end), and one run's events are bounded by their bytes as well as by max_events.
  size_t max_event_detail = size_t{16} << 10;
  size_t max_event_bytes = size_t{16} << 20;

  // The bytes one run's layer series (and module series, where kept) may take: 3/4 of the
  // budget over max_runs.
  size_t budget_share() const { return memory_budget / 4 * 3 / (max_runs > 0 ? max_runs : 1); }
  // The bytes one run's abandoned spans (the steps a rewind left behind, RunModel) may take:
  // an eighth of its share, out of the quarter the series do not take (with the defaults,
  // 12.6 MB a run: 101 MB for 8 runs, beside at most 134 MB of their events).
  size_t abandoned_share() const { return budget_share() / 8; }
};

}  // namespace keel::app
