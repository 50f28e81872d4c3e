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

bool round_layer_values(wire::StepRecord& record, int bits) {
  if (bits >= kExactMantissaBits) return false;
  const int counts = record.metric_block(wire::LayerMetric::kGradNonfinite);
  const size_t n = record.layer_count;
  for (size_t i = 0; i < record.layer_values.size(); ++i) {
    if (counts >= 0 && n > 0 && i / n == static_cast<size_t>(counts)) continue;
    record.layer_values[i] = round_mantissa(record.layer_values[i], bits);
  }
  return true;
}

}  // namespace keel::probe
