// ColumnGrid: a step range cut into pixel columns, the question every plot asks the model.
//
// What it is for: a view that is `columns` pixels wide and shows steps [first_step, last_step]
// builds one grid per frame and passes it to every series it draws (a heatmap passes the same
// grid to all its layers, so the column boundaries are computed once, not once per layer).
// Column c nominally covers steps [start(c), start(c + 1)); the widths differ by at most one
// step. With more columns than steps some columns are zero steps wide and report no data.
// Threads: a plain value; build and read it on any one thread.
// Never: throws (bad arguments are clamped: last < first becomes one step, columns < 1 one
// column), or allocates except in assign() when the column count grows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace keel::app {

class ColumnGrid {
 public:
  // Columns are capped at kMaxColumns: no screen is wider, and it bounds the query cost.
  static constexpr int kMaxColumns = 1 << 16;

  ColumnGrid() { assign(0, 0, 1); }
  ColumnGrid(int64_t first_step, int64_t last_step, int columns) {
    assign(first_step, last_step, columns);
  }

  // Re-targets the grid, reusing its storage (no allocation when `columns` did not grow).
  void assign(int64_t first_step, int64_t last_step, int columns);

  int64_t first_step() const { return starts_.front(); }
  int64_t last_step() const { return starts_.back() - 1; }
  int columns() const { return static_cast<int>(starts_.size()) - 1; }
  // Steps in the whole range (last - first + 1).
  int64_t span_steps() const { return starts_.back() - starts_.front(); }
  // Narrowest column, in steps (span / columns rounded down); the store picks its resolution
  // from this, so that each column is made of whole stored buckets.
  int64_t min_column_steps() const { return min_column_steps_; }

  // First step of column c, for c in [0, columns()]; start(columns()) is last_step() + 1.
  int64_t start(int c) const { return starts_[static_cast<size_t>(c)]; }
  // Column whose nominal range holds `step`, clamped to [0, columns() - 1].
  int column_of(int64_t step) const;

 private:
  std::vector<int64_t> starts_;
  int64_t min_column_steps_ = 1;
};

}  // namespace keel::app
