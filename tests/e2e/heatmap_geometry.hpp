// Where the dashboard drew its heatmap, from its `--verbose` line
// ("keel: heatmap x0 196 x1 1001 y0 385 row 6.00 layers 42"), for GUI tests that click rows or
// read pixels in a screenshot.
#pragma once

#include <cstdio>
#include <string>

namespace keel::e2e {

struct HeatmapGeometry {
  float x0 = 0, x1 = 0, y0 = 0, row = 0;
  int layers = 0;
};

// False when `line` holds no heatmap line.
inline bool parse_geometry(const std::string& line, HeatmapGeometry& g) {
  const size_t at = line.find("keel: heatmap");
  return at != std::string::npos &&
         std::sscanf(line.c_str() + at, "keel: heatmap x0 %f x1 %f y0 %f row %f layers %d", &g.x0, &g.x1, &g.y0,
                     &g.row, &g.layers) == 5;
}

}  // namespace keel::e2e
