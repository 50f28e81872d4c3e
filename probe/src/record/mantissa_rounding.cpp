#include "record/mantissa_rounding.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>

namespace keel::probe {

float round_mantissa(float value, int bits) {
  if (bits >= kExactMantissaBits || !std::isfinite(value)) return value;
  if (bits < 1) bits = 1;
  uint32_t u;
  std::memcpy(&u, &value, sizeof u);
  const int drop = kExactMantissaBits - bits;
  // Adding half of the dropped part carries into the exponent where it must (1.11..1 rounds
  // up to 2.0), which is what rounding a float to a shorter mantissa means.
  u += uint32_t{1} << (drop - 1);
  u &= ~((uint32_t{1} << drop) - 1);
  float rounded;
  std::memcpy(&rounded, &u, sizeof rounded);
  return rounded;
}

namespace {

// A metric-major block of `n` values for each metric in `mask`; the blocks of counts stay exact.
void round_blocks(std::vector<float>& values, size_t n, uint32_t mask, int bits) {
  size_t block = 0;
  for (int m = 0; m < wire::kLayerMetricCount; ++m) {
    if (!((mask >> m) & 1u)) continue;
    if (!wire::is_count(static_cast<wire::LayerMetric>(m))) {
      for (size_t i = block * n; i < (block + 1) * n && i < values.size(); ++i) values[i] = round_mantissa(values[i], bits);
    }
    ++block;
  }
}

}  // namespace

bool round_layer_values(wire::StepRecord& record, int bits) {
  if (bits >= kExactMantissaBits) return false;
  round_blocks(record.layer_values, record.layer_count, record.metric_mask, bits);
  round_blocks(record.module_values, record.module_count, record.module_mask, bits);
  return true;
}

}  // namespace keel::probe
