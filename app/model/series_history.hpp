// SeriesHistory: the whole history of one scalar series (one layer's metric, the loss, ...),
// in bounded memory, answering "what is in each pixel column" in time proportional to pixels.
//
// What it is for: the store under every plot and heatmap row. Samples arrive one per step, in
// increasing step order, possibly with gaps. Two stores hold them:
//   - recent window: the last R steps (ModelConfig::recent_steps) as raw float32, 4 bytes a
//     step, indexed by step (a missing step is a slot marked absent);
//   - archive: a min/max pyramid over ALL steps since the first. Base level: buckets of W
//     steps (W = bucket_steps(), a power of two, starting at 1), aligned to the series' origin
//     (its first step); levels above merge 4 buckets each. Every bucket keeps the min and max
//     of its finite samples and flags for data / NaN / +Inf / -Inf. When a step would need more
//     than B base buckets (ModelConfig::archive_buckets), every level merges pairs and W
//     doubles, so the archive never exceeds 4/3 * B buckets.
// Memory: bytes_used() <= max_bytes(config) = sizeof(SeriesHistory) + 4 R + 9 * (B + B/4 +
// ...) + per-level bookkeeping. Defaults (R = 8192, B = 2048): 58,010 bytes per series (32 KiB
// raw, 24.6 KB pyramid), whether the run has 10 thousand or 10 million steps; that is 7.1
// bytes per sample of the recent window, everything included.
//
// Query guarantee (columns() / summarize()), for a grid of P columns over [first, last]:
//   - Coarse mode, when the narrowest column is at least W steps: the store picks the coarsest
//     level whose bucket width V <= the narrowest column. Every bucket of that level that
//     overlaps [first, last] goes to exactly one column: the one holding its first step
//     (clamped into [first, last]). A column's min/max/flags are exactly those of the samples in
//     its buckets, and Column::first_step/last_step report those buckets' exact step extent.
//     So no sample in range is missed or counted twice, nothing is averaged, and a column
//     reaches at most V - 1 steps past its nominal edges. Cost: 1 to 5 buckets per column.
//   - Fine mode, when a column is narrower than W: inside the recent window each column is
//     exact over exactly its own steps (raw samples); older than the window each column
//     reports the base buckets overlapping it (one bucket may then show in several adjacent
//     columns). Cost: at most R raw samples plus 2 buckets per column.
//   In both modes a NaN/Inf anywhere in a column's covered steps sets that column's flag.
// Threads: not thread-safe. The model's owner thread (the UI thread, see history_store.hpp)
// makes every call.
// Never: throws, blocks, or keeps more than max_bytes(); append() allocates only while the
// stores grow towards their bounds (amortised, never once they are full); queries never
// allocate except columns(grid, vector&) growing its output.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "model/column_grid.hpp"
#include "model/model_config.hpp"
#include "model/value_summary.hpp"

namespace keel::app {

// One pixel column of a plot: its summary, and the steps whose samples were folded into it
// (whole buckets in coarse mode, so possibly a little wider than the column). Steps that were
// examined but held no sample count as covered; a column that examined nothing (past the
// newest step, before the first) has an empty range, last_step < first_step.
struct Column {
  Summary value;
  int64_t first_step = 0;
  int64_t last_step = -1;
};

// How many series ahead a loop appending to one series per layer calls prefetch_append.
inline constexpr size_t kAppendPrefetchAhead = 8;

class SeriesHistory {
 public:
  // `origin_step` aligns the archive's buckets: give every series of one run the same origin
  // (the run's first step) so that their buckets, and so a heatmap's cells, line up.
  SeriesHistory(int64_t origin_step, const ModelConfig& config);

  // Stores `value` at `step`. Returns false, storing nothing, when step <= last_step() (a
  // duplicate or late sample) or step < origin_step(). Any NaN payload is stored as the one
  // quiet NaN. Steps between last_step() and `step` become missing (no data).
  bool append(int64_t step, float value);

  // Forgets every sample after `step`, so that append() takes steps from step + 1 again: a
  // rewound run's continuation (RunModel keeps the forgotten span apart). The recent window
  // keeps the samples up to `step` it held; the pyramid's buckets after `step` go, and the one
  // holding `step` is rebuilt from what remains. That is exact when that bucket starts inside
  // the recent window (a rewind of up to R - W steps). Further back, the steps of that one
  // base bucket older than the window cannot be told apart: it keeps its extremes over the
  // steps forgotten too, a column a little wider than it should be rather than a lost NaN.
  // Nothing allocates; a step before the origin empties the series.
  void drop_after(int64_t step);

  // Asks the cache for what append(step, ...) touches besides this object: the step's recent
  // slot and the base level's open bucket, each in a heap block of its own. A caller appending
  // to thousands of series in a row (a wide record's layers) calls it a few series ahead: those
  // reads are otherwise a cache miss or two per append.
  // Neither read may sit behind a branch: GCC 12 dropped every prefetch of this function that
  // did (a bounds check on the slot, or on levels_), leaving no prefetch at all. The slot's
  // address is integer arithmetic, as the vector may not reach it yet (its first R steps) and
  // a prefetch never faults; level 0 always exists, as append() itself assumes.
  void prefetch_append(int64_t step) const {
    const auto slot = static_cast<uintptr_t>((step - origin_step_) & (recent_capacity_ - 1));
    __builtin_prefetch(reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(recent_.data()) + slot * sizeof(float)));
    __builtin_prefetch(&levels_.front().open);
  }

  bool empty() const { return last_step_ < origin_step_; }
  int64_t origin_step() const { return origin_step_; }
  // Last step stored; origin_step() - 1 while empty.
  int64_t last_step() const { return last_step_; }
  // Value stored at last_step() (NaN while empty).
  float last_value() const { return last_value_; }
  // Oldest step still held at full resolution.
  int64_t recent_first_step() const;
  // Base bucket width W of the archive, in steps (a power of two).
  int64_t bucket_steps() const { return int64_t{1} << base_shift_; }

  // Per-column summaries and covered steps; `out` is resized to grid.columns().
  void columns(const ColumnGrid& grid, std::vector<Column>& out) const;
  // Convenience for tests and one-off callers (allocates the grid and the result).
  std::vector<Column> columns(int64_t first_step, int64_t last_step, int pixel_columns) const;
  // Summaries only, into out[0 .. grid.columns()): the heatmap's per-row call.
  void summarize(const ColumnGrid& grid, Summary* out) const;

  // Raw sample at `step` if it is inside the recent window and was stored (a hover read-out).
  bool value_at(int64_t step, float* value) const;

  size_t bytes_used() const;
  // Upper bound of bytes_used() for any history length under `config`.
  static size_t max_bytes(const ModelConfig& config);
  // `config` with its full-resolution window or its pyramid halved, whichever weighs more,
  // until one series fits `bytes` (or both are at their least: 16 recent steps, 8 buckets).
  static ModelConfig config_within(const ModelConfig& config, size_t bytes);

 private:
  // Closed buckets live in the vectors; the bucket holding the newest step is "open" and
  // lives in `open`. An append touches only level 0's open bucket; a bucket is written out and
  // folded into the open bucket above when a later step leaves it. So ingest touches a few
  // cache lines per sample instead of one per level, and the query folds the open buckets of
  // the levels below into a level's open bucket (open_summary()).
  struct Level {
    std::vector<float> lo;
    std::vector<float> hi;
    std::vector<uint8_t> flags;
    SummaryBuilder open;
    size_t capacity_limit = 0;  // most closed buckets this level can ever hold
  };

  // Calls emit(column, summary, first_step, last_step) for each column of `grid`, in order:
  // in coarse mode (for_each_coarse_column) when the narrowest column holds a base bucket,
  // else in fine mode (for_each_fine_column); see the query guarantee above.
  template <typename Emit>
  void for_each_column(const ColumnGrid& grid, Emit&& emit) const;
  template <typename Emit>
  void for_each_coarse_column(const ColumnGrid& grid, Emit& emit) const;
  template <typename Emit>
  void for_each_fine_column(const ColumnGrid& grid, Emit& emit) const;
  void append_recent(int64_t step, float value);
  void close_buckets(int64_t last_offset, int64_t offset);
  void coarsen();
  // drop_after()'s pyramid part: level k's buckets after `step` go, its open one rebuilt.
  void drop_buckets_after(int64_t step, int64_t old_recent_first);
  // Index of the open bucket of level k, and its full content (open buckets of levels <= k).
  int64_t open_index(size_t k) const;
  SummaryBuilder open_summary(size_t k) const;

  int64_t origin_step_;
  int64_t last_step_;
  float last_value_ = std::numeric_limits<float>::quiet_NaN();
  int64_t recent_capacity_;          // R, a power of two
  int64_t archive_buckets_;          // B, a power of two
  int base_shift_ = 0;               // W = 1 << base_shift_
  std::vector<float> recent_;        // slot (step - origin) & (R - 1); absent = kAbsentBits
  // Oldest step whose slot still holds its own sample: after drop_after() the slots of the
  // steps just before it were reused by the forgotten steps, a lap ahead.
  int64_t recent_floor_;
  std::vector<Level> levels_;        // [0] is the base; level k buckets are W * 4^k wide
};

}  // namespace keel::app
