// Accessors of the wire messages: metric names and the metric-major layer block.
#include "keel/wire/messages.hpp"

#include <limits>

namespace keel::wire {

const char* layer_metric_name(LayerMetric metric) {
  // A value cast from a newer peer's index: callers print it, so never return null.
  if (static_cast<int>(metric) >= kLayerMetricCount) return "unknown";
  return info_of(metric).name;
}

namespace {

int block_in(uint32_t mask, LayerMetric metric) {
  const unsigned index = static_cast<unsigned>(metric);
  if (index >= 32u) return -1;
  const uint32_t bit = 1u << index;
  if ((mask & bit) == 0) return -1;
  // Blocks are packed in ascending metric order, so the block index is the number of
  // present metrics below this one.
  return __builtin_popcount(mask & (bit - 1u));
}

}  // namespace

int StepRecord::metric_block(LayerMetric metric) const { return block_in(metric_mask, metric); }

int StepRecord::module_block(LayerMetric metric) const { return block_in(module_mask, metric); }

float StepRecord::layer_value(LayerMetric metric, uint32_t layer) const {
  const int block = metric_block(metric);
  if (block < 0 || layer >= layer_count) return std::numeric_limits<float>::quiet_NaN();
  const size_t index = static_cast<size_t>(block) * layer_count + layer;
  // A hand-built record may disagree with its mask; never read past the values we hold.
  if (index >= layer_values.size()) return std::numeric_limits<float>::quiet_NaN();
  return layer_values[index];
}

}  // namespace keel::wire
