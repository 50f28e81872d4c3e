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

// A metric-major block of `n` values per metric; the block `counts` (non-finite counts, -1:
// none) stays exact.
void round_block(std::vector<float>& values, size_t n, int counts, int bits) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (counts >= 0 && n > 0 && i / n == static_cast<size_t>(counts)) continue;
    values[i] = round_mantissa(values[i], bits);
  }
}

}  // namespace

bool round_layer_values(wire::StepRecord& record, int bits) {
  if (bits >= kExactMantissaBits) return false;
  round_block(record.layer_values, record.layer_count, record.metric_block(wire::LayerMetric::kGradNonfinite), bits);
  round_block(record.module_values, record.module_count, record.module_block(wire::LayerMetric::kGradNonfinite), bits);
  return true;
}

}  // namespace keel::probe
