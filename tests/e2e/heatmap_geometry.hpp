// Where the dashboard drew its heatmap, from its `--verbose` line
// ("keel: heatmap x0 196 x1 1001 y0 385 row 6.00 layers 42 rows 42 folded 0"), for GUI tests
// that click rows or read pixels in a screenshot. `rows` is how many rows the heatmap has (its
// layers and its folded modules, one each), `folded` how many of them are folded modules; a
// line without them (an older dashboard) has one row per layer.
#pragma once

#include <cstdio>
#include <string>

namespace keel::e2e {

struct HeatmapGeometry {
  float x0 = 0, x1 = 0, y0 = 0, row = 0;
  int layers = 0;
  int rows = 0;
  int folded = 0;
};

// False when `line` holds no heatmap line.
inline bool parse_geometry(const std::string& line, HeatmapGeometry& g) {
  const size_t at = line.find("keel: heatmap");
  if (at == std::string::npos) return false;
  const int fields = std::sscanf(line.c_str() + at, "keel: heatmap x0 %f x1 %f y0 %f row %f layers %d rows %d folded %d",
                                 &g.x0, &g.x1, &g.y0, &g.row, &g.layers, &g.rows, &g.folded);
  if (fields < 5) return false;
  if (fields < 7) {
    g.rows = g.layers;
    g.folded = 0;
  }
  return true;
}

}  // namespace keel::e2e
