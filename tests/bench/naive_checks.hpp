// What both probe benchmarks (CPU and GPU) compare keel against.
// Threads: the training thread. Never: touches the probe.
#pragma once

#include <vector>

#include "trainer.hpp"

namespace keel::bench {

// One update with NaN-hunting code as it is usually written: per parameter, isnan/isinf checks
// and the norm, each read back with .item(), and a weight copy (into `copies`, reused) for the
// update ratio; the update applied only when every gradient is finite.
void naive_step(keel::demo::Trainer& trainer, std::vector<torch::Tensor>& copies);

}  // namespace keel::bench
