#include "ui/heatmap_image.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace keel::app::ui {
namespace {

// A scale narrower than this is widened around its middle: a constant metric still maps to
// the middle of the colour range instead of dividing by zero.
constexpr double kMinLogRange = 1e-3;

}  // namespace

HeatmapImage::HeatmapImage() {
  for (int i = 0; i < kLevels; ++i) table_[size_t(i)] = viridis(float(i) / float(kLevels - 1));
}

void HeatmapImage::build(const std::vector<Summary>& cells, size_t rows, size_t columns,
                         int min_nonfinite_texels, const NoGradientCells& no_gradient) {
  rows_ = rows;
  columns_ = columns;
  const size_t count = std::min(cells.size(), rows * columns);
  logs_.resize(count);
  pixels_.resize(rows * columns);

  // log10f on the float max: the colour has 256 levels, float is far more than enough, and it
  // is several times cheaper than the double log10 per cell.
  float lo = std::numeric_limits<float>::infinity(), hi = -lo;
  for (size_t i = 0; i < count; ++i) {
    const Summary& cell = cells[i];
    const float v = cell.max > 0 ? std::log10(cell.max) : -std::numeric_limits<float>::infinity();
    logs_[i] = v;
    if (cell.has_finite() && std::isfinite(v)) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  }
  double low = lo, high = hi;
  if (!(low <= high)) low = high = 0;
  if (high - low < kMinLogRange) {
    low -= 0.5;
    high += 0.5;
  }
  log_low_ = low;
  log_high_ = high;

  const float scale = float((kLevels - 1) / (high - low));
  const float offset = float(low);
  for (size_t i = 0; i < count; ++i) {
    const Summary& cell = cells[i];
    if (cell.has_nonfinite()) {
      pixels_[i] = kNonfiniteColour;
    } else if (!cell.has_data()) {
      const size_t row = i / columns, column = i % columns;
      const bool greyed = row < no_gradient.rows.size() && no_gradient.rows[row] &&
                          column >= no_gradient.first_column && column < no_gradient.end_column;
      pixels_[i] = greyed ? kNoGradientColour : kNoDataColour;
    } else {
      // max(-inf, 0) is 0: zeros and non-positive maxima take the bottom colour.
      const float level = std::clamp((logs_[i] - offset) * scale + 0.5f, 0.0f, float(kLevels - 1));
      pixels_[i] = table_[size_t(level)];
    }
  }
  std::fill(pixels_.begin() + ptrdiff_t(count), pixels_.end(), kNoDataColour);

  if (min_nonfinite_texels <= 1) return;
  // Widen every non-finite cell, centred on it; done from the cells (not the pixels) so that
  // widened marks do not widen again.
  const ptrdiff_t before = (min_nonfinite_texels - 1) / 2, after = min_nonfinite_texels / 2;
  for (size_t r = 0; r < rows; ++r) {
    const size_t row = r * columns;
    for (size_t c = 0; c < columns && row + c < count; ++c) {
      if (!cells[row + c].has_nonfinite()) continue;
      const ptrdiff_t first = std::max<ptrdiff_t>(0, ptrdiff_t(c) - before);
      const ptrdiff_t last = std::min<ptrdiff_t>(ptrdiff_t(columns) - 1, ptrdiff_t(c) + after);
      std::fill(pixels_.begin() + ptrdiff_t(row) + first, pixels_.begin() + ptrdiff_t(row) + last + 1,
                kNonfiniteColour);
    }
  }
}

Rgba HeatmapImage::abandoned_grey(int level) {
  // From 60 to 200: darker than no data's blue-black never, lighter than white text never.
  const auto v = static_cast<uint32_t>(60 + std::clamp(level, 0, kLevels) * 140 / kLevels);
  return 0xFF000000u | (v << 16) | (v << 8) | v;
}

void HeatmapImage::grey_abandoned(const std::vector<Summary>& cells, const std::vector<Summary>& abandoned) {
  const size_t count = std::min({cells.size(), abandoned.size(), pixels_.size()});
  const float scale = float((kLevels - 1) / (log_high_ - log_low_));
  const float offset = float(log_low_);
  for (size_t i = 0; i < count; ++i) {
    const Summary& cell = abandoned[i];
    if (cells[i].has_data() || !cell.has_data()) continue;
    int level = kLevels;
    if (!cell.has_nonfinite()) {
      const float v = cell.max > 0 ? std::log10(cell.max) : -std::numeric_limits<float>::infinity();
      level = int(std::clamp((v - offset) * scale + 0.5f, 0.0f, float(kLevels - 1)));
    }
    pixels_[i] = abandoned_grey(level);
  }
}

}  // namespace keel::app::ui
