#include "ui/colormap.hpp"

#include <algorithm>
#include <cmath>

namespace keel::app::ui {
namespace {

// Viridis sampled at 9 evenly spaced points (matplotlib's table); linear interpolation between
// them stays within a couple of levels of the full 256-entry table.
constexpr float kStops[9][3] = {
    {0.267f, 0.005f, 0.329f}, {0.283f, 0.141f, 0.458f}, {0.254f, 0.265f, 0.530f},
    {0.207f, 0.372f, 0.553f}, {0.164f, 0.471f, 0.558f}, {0.128f, 0.567f, 0.551f},
    {0.135f, 0.659f, 0.518f}, {0.478f, 0.821f, 0.318f}, {0.993f, 0.906f, 0.144f}};

}  // namespace

Rgba viridis(float t) {
  if (!std::isfinite(t)) t = 0.0f;
  t = std::clamp(t, 0.0f, 1.0f) * 8.0f;
  const int i = std::min(7, int(t));
  const float f = t - float(i);
  uint32_t out = 0xFF000000u;
  for (int c = 0; c < 3; ++c) {
    const float v = kStops[i][c] + (kStops[i + 1][c] - kStops[i][c]) * f;
    out |= uint32_t(std::lround(v * 255.0f)) << (8 * c);
  }
  return out;
}

}  // namespace keel::app::ui
