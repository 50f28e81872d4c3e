#include "model/column_grid.hpp"

#include <algorithm>

namespace keel::app {
namespace {

// Steps are clamped so that span and column arithmetic cannot overflow int64; no training run
// comes near 2^62 steps.
constexpr int64_t kStepLimit = int64_t{1} << 62;

int64_t clamp_step(int64_t step) { return std::clamp(step, -kStepLimit, kStepLimit); }

}  // namespace

void ColumnGrid::assign(int64_t first_step, int64_t last_step, int columns) {
  first_step = clamp_step(first_step);
  last_step = std::max(clamp_step(last_step), first_step);
  columns = std::clamp(columns, 1, kMaxColumns);
  const int64_t span = last_step - first_step + 1;
  starts_.resize(static_cast<size_t>(columns) + 1);
  // 128-bit products: span * columns can pass 2^63 for far-apart steps.
  for (int c = 0; c <= columns; ++c) {
    starts_[static_cast<size_t>(c)] =
        first_step + static_cast<int64_t>(static_cast<__int128>(span) * c / columns);
  }
  min_column_steps_ = span / columns;
}

int ColumnGrid::column_of(int64_t step) const {
  const int64_t first = first_step();
  if (step <= first) return 0;
  if (step > last_step()) return columns() - 1;
  // Column c holds step s iff start(c) <= s < start(c + 1); the quotient below is that c or
  // one past it (start() rounds down), so one correction step suffices.
  int c = static_cast<int>(static_cast<__int128>(step - first) * columns() / span_steps());
  c = std::min(c, columns() - 1);
  while (c > 0 && start(c) > step) --c;
  while (c + 1 < columns() && start(c + 1) <= step) ++c;
  return c;
}

}  // namespace keel::app
