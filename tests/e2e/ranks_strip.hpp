// Where the dashboard drew its ranks x layers strip, from its `--verbose` line
// ("keel: ranks x0 196 x1 1002 y0 393 row 16.00 ranks 2 layers 42 job 1 metric grad_norm"), and
// the non-finite cells a screenshot shows in it, for GUI tests. `job` is 1 when the strip has
// the sharded job's row, under the ranks' (a line without it, an older dashboard's, has none);
// `metric` is the per-layer metric the strip shows, by its wire name (empty when not said).
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>

namespace keel::e2e {

struct RanksStrip {
  float x0 = 0, x1 = 0, y0 = 0, row = 0;
  int ranks = 0, layers = 0, job = 0;
  std::string metric;
};

// False when `line` holds no strip line.
inline bool parse_ranks_strip(const std::string& line, RanksStrip& s) {
  const size_t at = line.find("keel: ranks");
  if (at == std::string::npos) return false;
  s.job = 0;
  char metric[64] = "";
  const int fields = std::sscanf(line.c_str() + at,
                                 "keel: ranks x0 %f x1 %f y0 %f row %f ranks %d layers %d job %d metric %63s", &s.x0,
                                 &s.x1, &s.y0, &s.row, &s.ranks, &s.layers, &s.job, metric);
  s.metric = metric;
  return fields >= 6;
}

// Pixels of the non-finite colour (255, 32, 64) in an RGB screenshot of `width` x `height`,
// inside the strip's row `row` (the ranks' in order, then the job's) and layers
// [first_layer, last_layer].
inline int nonfinite_pixels(const unsigned char* rgb, int width, int height, const RanksStrip& s, int row,
                            int first_layer, int last_layer) {
  const float column = (s.x1 - s.x0) / float(s.layers);
  const int top = int(s.y0 + s.row * float(row)), bottom = int(s.y0 + s.row * float(row + 1));
  const int left = int(s.x0 + column * float(first_layer)), right = int(s.x0 + column * float(last_layer + 1));
  int count = 0;
  for (int y = top; y < bottom && y < height; ++y) {
    for (int x = left; x < right && x < width; ++x) {
      const unsigned char* p = rgb + (size_t(y) * size_t(width) + size_t(x)) * 3;
      count += p[0] == 255 && p[1] == 32 && p[2] == 64;
    }
  }
  return count;
}

}  // namespace keel::e2e
