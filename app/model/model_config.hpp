// ModelConfig: the memory budget of the dashboard's model.
//
// What it is for: sizing every series the model keeps. Each series holds its last
// `recent_steps` steps at full resolution (4 bytes a sample) plus a min/max pyramid over its
// whole history whose base level never exceeds `archive_buckets` buckets (9 bytes a bucket,
// levels of 4x above it: at most 4/3 * archive_buckets buckets in all). So one series never
// uses more than SeriesHistory::max_bytes(config), however long the run (see
// series_history.hpp for the numbers), and a model never holds more than `max_runs` runs.
// With the defaults a series is at most 58,010 bytes: a 1,000-layer model (6,000 layer series)
// stays under 350 MB per run for any run length.
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
};

}  // namespace keel::app
