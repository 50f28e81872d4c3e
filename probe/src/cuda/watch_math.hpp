// watch_math: the statistics of a watched tensor (the logits) as one read gives them: absmax,
// sum of squares and non-finite count (stats_math.hpp's GradAccumulator) and, per row (the last
// dimension), log-sum-exp, summed over the rows. Shared by the watch kernel and the CPU tests.
//
// Log-sum-exp online: each row keeps its running maximum m and s = sum exp(x - m), so partial
// rows merge (m = max(m1, m2), s = s1 exp(m1 - m) + s2 exp(m2 - m)) and no tensor-sized
// temporary is needed. As torch.logsumexp: a NaN in the row gives NaN, a +Inf gives +Inf, a
// row of -Inf (or an empty row) gives -Inf. Per element in fp32 (exp of a value <= 0, summed
// over at most a row), rows summed in fp64.
// Threads: plain values. Never: reads anything but its arguments.
#pragma once

#include <cmath>
#include <cstdint>

#include "stats_math.hpp"

namespace keel::probe::cuda {

struct RowLogSumExp {
  float max = -INFINITY;
  float sum = 0;            // of exp(x - max); 0 while nothing finite was added
  uint32_t nan = 0;         // counts (not flags): the block reduction merges them by adding
  uint32_t pos_inf = 0;

  KEEL_HD void add(float x) {
    if (x != x) {
      ++nan;
    } else if (x == INFINITY) {
      ++pos_inf;
    } else if (x != -INFINITY) {
      if (x > max) {
        sum = sum * expf(max - x) + 1.0f;
        max = x;
      } else {
        sum += expf(x - max);
      }
    }
  }

  KEEL_HD void merge(const RowLogSumExp& other) {
    nan += other.nan;
    pos_inf += other.pos_inf;
    if (other.sum == 0) return;
    if (sum == 0) {
      max = other.max;
      sum = other.sum;
      return;
    }
    const float m = max > other.max ? max : other.max;
    sum = sum * expf(max - m) + other.sum * expf(other.max - m);
    max = m;
  }

  KEEL_HD double value() const {
    if (nan > 0) return NAN;
    if (pos_inf > 0) return INFINITY;
    if (sum == 0) return -INFINITY;
    return static_cast<double>(max) + log(static_cast<double>(sum));
  }
};

// One row's statistics, as the row kernel writes them.
struct RowStats {
  GradAccumulator values;
  RowLogSumExp lse;

  KEEL_HD void add(double x) {
    values.add(x);
    lse.add(static_cast<float>(x));
  }
  KEEL_HD void merge(const RowStats& other) {
    values.merge(other.values);
    lse.merge(other.lse);
  }
};

// The whole tensor, folded from its rows in row order.
struct WatchTotals {
  GradAccumulator values;
  double lse_sum = 0;        // sum over rows of log-sum-exp
  uint64_t rows = 0;

  KEEL_HD void fold(const RowStats& row) {
    values.merge(row.values);
    lse_sum += row.lse.value();
    ++rows;
  }
  KEEL_HD void merge(const WatchTotals& other) {
    values.merge(other.values);
    lse_sum += other.lse_sum;
    rows += other.rows;
  }
};

// Elements [begin, end) of one row, one every `stride` from begin + offset: a GPU thread's share
// (offset = thread index, stride = threads), or the whole row on the host (0, 1).
template <ElementType T>
KEEL_HD RowStats row_range(const typename Element<T>::Storage* data, int64_t begin, int64_t end, int64_t offset,
                           int64_t stride) {
  RowStats acc;
  for (int64_t i = begin + offset; i < end; i += stride) acc.add(Element<T>::load(data, i));
  return acc;
}

}  // namespace keel::probe::cuda
