// Synthetic telemetry for keel-bench-app: what a probe on a transformer-like model would send.
//
// What it is for: feeding the dashboard's model (and, encoded, a real socket) without libtorch.
// Values look like training: each layer has its own gradient scale spread over three decades,
// gradients decay slowly, every value carries fresh multiplicative noise, a layer spikes now
// and then, and about one step in 5,000 has a NaN gradient in one layer (flagged non-finite,
// the update skipped), so the heatmap and plots draw what they would draw on a real run
// rather than the flat rows a constant series would give. Layers are named as a transformer's
// (blocks.3.attn.qkv.weight); past 5,000 layers as a mixture of experts' (256 experts of three
// matrices per block: blocks.17.experts.203.w1.weight), so the dashboard's grouping by module
// is exercised at the sizes where it matters.
// Threads: one SyntheticRun per thread; plain values otherwise.
// Never: allocates once a record has reached its size (fill() rewrites it in place), or
// touches a socket.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "keel/wire/messages.hpp"

namespace keel::bench {

class SyntheticRun {
 public:
  SyntheticRun(int layer_count, uint64_t seed);

  int layer_count() const { return int(base_grad_norm_.size()); }
  const std::string& layer_name(int layer) const { return description_.layers[size_t(layer)].name; }
  // A description naming every layer and the one watched tensor ("logits").
  const wire::RunDescription& description() const { return description_; }

  // Rewrites `record` as the record of `step`: all six metrics of every layer, the global
  // scalars and the watch. seq follows the description's. stamp_unix_ns is left to the caller
  // (the latency test stamps at send time).
  void fill(int64_t step, wire::StepRecord& record);

 private:
  // xorshift64*: cheap enough that generating a 1,000-layer record costs a few microseconds
  // against the ~0.3 ms the model needs to store it.
  uint64_t next_bits();
  float uniform();  // [0, 1)

  wire::RunDescription description_;
  uint64_t state_;
  std::vector<float> base_grad_norm_;
  std::vector<float> absmax_factor_;
  std::vector<float> zero_frac_;
  std::vector<float> param_norm_;
  std::vector<float> update_ratio_;
};

}  // namespace keel::bench
