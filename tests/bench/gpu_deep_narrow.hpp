// keel-bench-gpu --model deep-narrow: the probe at many small tensors on a GPU (issue 30's
// target: 50,000 small tensors, <= 2% over the fused step, no host sync).
//
// keel-bench-probe's deep narrow model (deep_narrow.hpp: N/2 Linear(16, 16), N tensors), fp32,
// AdamW, in identical copies that take turns round by round in rotating order:
//   plain          optimizer.step() (libtorch's AdamW, a few kernels per tensor)
//   fused          the same step by ATen's fused kernel (FusedOptimizerStep, found_inf always
//                  0): the baseline, as the probe takes the step when it decides on the device
//   keel_defaults  the probe with ProbeOptions{} (publishing on loopback, no commands)
// Per copy: the median step time (the device's work finished), host syncs per step (c10's sync
// debug mode), and for the probe its own time on the training thread (ProbeTiming::probe_us)
// and that over N. A step of this model launches some 200,000 small kernels, so it is bound by
// the host, and the probe's host time per tensor is what the target measures. The last line
// is one JSON object.
// Threads: the caller's (the probe starts its own).
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace keel::bench {

struct DeepNarrowGpuRun {
  int64_t tensors = 50000;   // rounded down to an even count
  int rounds = 6;
  int warmup_rounds = 1;
  int steps_per_round = 2;
  int64_t batch = 64;
  // The CUDA device, or the CPU to check the bench itself where there is no GPU (the CPU's
  // figures are keel-bench-probe's per-tensor table).
  torch::Device device{torch::kCUDA};
};

// Prints the table and the JSON line; returns the process's exit status.
int run_deep_narrow_gpu_bench(const DeepNarrowGpuRun& run);

}  // namespace keel::bench
