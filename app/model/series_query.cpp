// SeriesHistory queries: one summary per pixel column, in time proportional to the columns
// (plus at most the recent window when zoomed in past the archive's resolution). The
// guarantee these functions keep is stated in series_history.hpp.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "model/series_history.hpp"
#include "model/series_layout.hpp"

namespace keel::app {
namespace {

// Folds `count` consecutive recent-window slots, skipping absent ones. Inlined and kept in
// locals: the builder round-tripping through memory once per column cost more than the scan.
inline __attribute__((always_inline)) void fold_recent(const float* slots, size_t count,
                                                       float& lo, float& hi, uint32_t& flags) {
  for (size_t i = 0; i < count; ++i) {
    const float value = slots[i];
    if (std::isfinite(value)) {
      lo = value < lo ? value : lo;
      hi = value > hi ? value : hi;
      flags |= kHasData;
    } else if (!series_layout::is_absent(value)) {
      flags |= SummaryBuilder::flags_of(value);
    }
  }
}

}  // namespace

template <typename Emit>
void SeriesHistory::for_each_column(const ColumnGrid& grid, Emit&& emit) const {
  if (empty()) {
    for (int c = 0; c < grid.columns(); ++c) emit(c, SummaryBuilder{}, grid.start(c), grid.start(c) - 1);
  } else if (grid.min_column_steps() >= bucket_steps()) {
    for_each_coarse_column(grid, emit);
  } else {
    for_each_fine_column(grid, emit);
  }
}

// Coarse mode: whole buckets of one level per column.
template <typename Emit>
void SeriesHistory::for_each_coarse_column(const ColumnGrid& grid, Emit& emit) const {
  const int columns = grid.columns();
  const int64_t origin = origin_step_;
  const int64_t min_width = grid.min_column_steps();
  // The coarsest level whose buckets fit in the narrowest column, so each column is 1 to 5
  // whole buckets, and each bucket belongs to the column of its first step.
  size_t k = 0;
  while (k + 1 < levels_.size() && (int64_t{1} << (base_shift_ + 2 * (k + 1))) <= min_width) ++k;
  const int shift = base_shift_ + 2 * static_cast<int>(k);
  const Level& level = levels_[k];
  // Closed buckets come from the vectors, the open one (the newest) from open_summary().
  const int64_t closed = static_cast<int64_t>(level.lo.size());
  const int64_t open = open_index(k);
  const SummaryBuilder open_bucket = open_summary(k);
  const int64_t n = open + 1;
  const float* lo = level.lo.data();
  const float* hi = level.hi.data();
  const uint8_t* flags = level.flags.data();
  // First bucket starting at or after `step`.
  auto first_starting_at = [&](int64_t step) {
    const int64_t offset = step - origin;
    if (offset <= 0) return int64_t{0};
    return std::min(n, (offset + (int64_t{1} << shift) - 1) >> shift);
  };
  // Column 0 also takes the bucket that straddles the range's first step.
  const int64_t first_offset = grid.first_step() - origin;
  int64_t begin = first_offset <= 0 ? 0 : std::min(n, first_offset >> shift);
  for (int c = 0; c < columns; ++c) {
    const int64_t end = first_starting_at(grid.start(c + 1));
    float column_lo = std::numeric_limits<float>::infinity();
    float column_hi = -std::numeric_limits<float>::infinity();
    uint32_t column_flags = 0;
    const int64_t closed_end = std::min(end, closed);
    for (int64_t j = begin; j < closed_end; ++j) {
      column_lo = lo[j] < column_lo ? lo[j] : column_lo;
      column_hi = hi[j] > column_hi ? hi[j] : column_hi;
      column_flags |= flags[j];
    }
    SummaryBuilder builder;
    builder.lo = column_lo;
    builder.hi = column_hi;
    builder.flags = column_flags;
    if (begin <= open && open < end) {
      builder.add_bucket(open_bucket.lo, open_bucket.hi, open_bucket.flags);
    }
    if (begin < end) {
      emit(c, builder, origin + (begin << shift), origin + (end << shift) - 1);
    } else {
      emit(c, builder, grid.start(c), grid.start(c) - 1);
    }
    begin = std::max(begin, end);
  }
}

// Fine mode: raw samples inside the recent window, base buckets overlapping the column
// before it.
template <typename Emit>
void SeriesHistory::for_each_fine_column(const ColumnGrid& grid, Emit& emit) const {
  const int columns = grid.columns();
  const int64_t origin = origin_step_;
  const Level& base = levels_[0];
  const int64_t closed = static_cast<int64_t>(base.lo.size());
  const int64_t open = open_index(0);
  const int64_t n = open + 1;
  const int shift = base_shift_;
  const int64_t recent_lo = recent_first_step();
  const int64_t mask = recent_capacity_ - 1;
  for (int c = 0; c < columns; ++c) {
    const int64_t column_begin = grid.start(c);
    const int64_t column_end = grid.start(c + 1);  // exclusive
    SummaryBuilder builder;
    int64_t covered_first = std::numeric_limits<int64_t>::max();
    int64_t covered_last = std::numeric_limits<int64_t>::min();

    const int64_t old_begin = std::max(column_begin, origin);
    const int64_t old_end = std::min(column_end, recent_lo);  // exclusive
    if (old_begin < old_end) {
      const int64_t ja = std::min(n, (old_begin - origin) >> shift);
      const int64_t jb = std::min(n, ((old_end - 1 - origin) >> shift) + 1);
      for (int64_t j = ja; j < std::min(jb, closed); ++j) {
        builder.add_bucket(base.lo[static_cast<size_t>(j)], base.hi[static_cast<size_t>(j)],
                           base.flags[static_cast<size_t>(j)]);
      }
      if (ja <= open && open < jb) builder.add_bucket(base.open.lo, base.open.hi, base.open.flags);
      if (ja < jb) {
        covered_first = std::min(covered_first, origin + (ja << shift));
        covered_last = std::max(covered_last, origin + (jb << shift) - 1);
      }
    }

    const int64_t new_begin = std::max(column_begin, recent_lo);
    const int64_t new_end = std::min(column_end, last_step_ + 1);  // exclusive
    if (new_begin < new_end) {
      covered_first = std::min(covered_first, new_begin);
      covered_last = std::max(covered_last, new_end - 1);
      // The steps map to one or two contiguous runs of the ring.
      const int64_t slot = (new_begin - origin) & mask;
      const int64_t count = new_end - new_begin;
      float lo = builder.lo;
      float hi = builder.hi;
      uint32_t flags = builder.flags;
      const int64_t first_run = std::min(count, recent_capacity_ - slot);
      fold_recent(recent_.data() + slot, static_cast<size_t>(first_run), lo, hi, flags);
      fold_recent(recent_.data(), static_cast<size_t>(count - first_run), lo, hi, flags);
      builder.lo = lo;
      builder.hi = hi;
      builder.flags = flags;
    }
    if (covered_first > covered_last) {
      covered_first = column_begin;
      covered_last = column_begin - 1;
    }
    emit(c, builder, covered_first, covered_last);
  }
}

void SeriesHistory::columns(const ColumnGrid& grid, std::vector<Column>& out) const {
  out.resize(static_cast<size_t>(grid.columns()));
  for_each_column(grid, [&](int c, const SummaryBuilder& builder, int64_t first, int64_t last) {
    Column& column = out[static_cast<size_t>(c)];
    column.value = builder.finish();
    column.first_step = first;
    column.last_step = last;
  });
}

std::vector<Column> SeriesHistory::columns(int64_t first_step, int64_t last_step,
                                           int pixel_columns) const {
  std::vector<Column> out;
  columns(ColumnGrid(first_step, last_step, pixel_columns), out);
  return out;
}

void SeriesHistory::summarize(const ColumnGrid& grid, Summary* out) const {
  for_each_column(grid, [out](int c, const SummaryBuilder& builder, int64_t, int64_t) {
    out[c] = builder.finish();
  });
}

}  // namespace keel::app
