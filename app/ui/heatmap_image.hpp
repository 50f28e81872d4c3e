// keel app HeatmapImage: heatmap cells -> one RGBA texel per cell, ready to upload as a texture.
//
// What it is for: the heatmap's per-cell work, kept out of ImGui so that it is cheap and
// testable. Colour is log10 of a cell's max (a spike inside a wide column must not fade) on a
// 256-level viridis table, scaled to the finite cells given; a cell holding a NaN or Inf has
// kNonfiniteColour and is widened to at least `min_nonfinite_texels` texels (at hundreds of
// steps per screen a single poisoned step must not be one pixel that the eye or a screenshot
// misses); a cell without data has kNoDataColour, or kNoGradientColour in a row whose layer has
// no gradient to measure (frozen or unused), so a frozen layer is not mistaken for a dead one.
// Threads: a plain object; one thread at a time (the UI thread).
// Never: throws; allocates only when the image grows.
#pragma once

#include <array>
#include <cstddef>
#include <vector>

#include "model/value_summary.hpp"
#include "ui/colormap.hpp"

namespace keel::app::ui {

// Which empty cells are a layer's missing gradient rather than missing data: those of the
// flagged rows (by row of the cells; rows past the end are not flagged) in the columns the run
// has steps in, [first_column, end_column).
struct NoGradientCells {
  std::vector<bool> rows;
  size_t first_column = 0, end_column = 0;
};

class HeatmapImage {
 public:
  HeatmapImage();

  // Colours `cells` (rows x columns, row-major) into pixels(), same layout.
  void build(const std::vector<Summary>& cells, size_t rows, size_t columns, int min_nonfinite_texels,
             const NoGradientCells& no_gradient = {});

  // After build(): each cell without data of its own whose `abandoned` cell (same layout: what a
  // rewind left behind in those steps) has data becomes a grey whose lightness is that value's
  // place on build()'s scale (a non-finite one the lightest), so the span reads as the same
  // picture without colour. Cells with data of their own (the continuation) stay as built.
  void grey_abandoned(const std::vector<Summary>& cells, const std::vector<Summary>& abandoned);
  // The grey of a value at `level` (0 to kLevels - 1) of the scale; of a non-finite one at kLevels.
  static Rgba abandoned_grey(int level);
  const std::vector<Rgba>& pixels() const { return pixels_; }
  size_t rows() const { return rows_; }
  size_t columns() const { return columns_; }
  // The colour scale: log10 values at the bottom and top of the map (at least 1e-3 apart).
  double log_low() const { return log_low_; }
  double log_high() const { return log_high_; }

  // Levels in the viridis table; a colour is one of these, so equal values share a colour.
  static constexpr int kLevels = 256;

 private:
  std::array<Rgba, kLevels> table_;
  std::vector<float> logs_;  // log10 of each cell's max, computed once per cell
  std::vector<Rgba> pixels_;
  size_t rows_ = 0, columns_ = 0;
  double log_low_ = -0.5, log_high_ = 0.5;
};

}  // namespace keel::app::ui
