// keel-bench-codec: the wire codec's cost per step record, encoded and decoded, at keel-demo's
// 42 layers and at 2,000. Prints the best of 5 rounds in ns per message. To compare two
// versions of the codec, build this file against each one's keel_wire and run both, in turn,
// on a quiet machine: the figures are absolute, and this host's load moves them.
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "keel/wire/codec.hpp"

namespace {

using namespace keel::wire;

StepRecord record_of(uint32_t layers) {
  StepRecord r;
  r.step = 123;
  r.run = "run-1";
  r.loss = 2.5;
  r.layer_count = layers;
  r.metric_mask = kAllLayerMetrics;
  r.layer_values.assign(size_t(layers) * kLayerMetricCount, 0.5f);
  r.watches = {{"logits", 1.f, 2.f, 3.f, 0}};
  r.scaler = ScalerState{65536.0, 3, false, 1};
  return r;
}

}  // namespace

int main() {
  using Clock = std::chrono::steady_clock;
  for (uint32_t layers : {42u, 2000u}) {
    const StepRecord record = record_of(layers);
    std::vector<char> bytes;
    const int messages = layers > 100 ? 20000 : 200000;
    double best_encode = 1e18, best_decode = 1e18;
    for (int round = 0; round < 5; ++round) {
      const auto start = Clock::now();
      for (int i = 0; i < messages; ++i) encode(record, bytes);
      const auto encoded = Clock::now();
      int decoded = 0;
      for (int i = 0; i < messages; ++i) decoded += decode(bytes.data(), bytes.size()).ok ? 1 : 0;
      const auto done = Clock::now();
      if (decoded != messages) {
        std::fprintf(stderr, "keel-bench-codec: a record did not decode\n");
        return 1;
      }
      best_encode = std::min(best_encode, std::chrono::duration<double, std::nano>(encoded - start).count() / messages);
      best_decode = std::min(best_decode, std::chrono::duration<double, std::nano>(done - encoded).count() / messages);
    }
    std::printf("step record, %u layers (%zu bytes): encode %.0f ns, decode %.0f ns\n", layers, bytes.size(),
                best_encode, best_decode);
  }
  return 0;
}
