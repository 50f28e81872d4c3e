// measures_in_backward: whether a probe measures its small CPU gradients inside backward
// (AccumulationStats' hooks) or leaves every gradient to the pass after backward.
//
// What it is for: the hooks read each small gradient, and its weight, right after autograd
// wrote it, while it is in cache; the pass reads them all after backward, from wherever they
// are by then. A model whose small tensors (weights and gradients together) fit in the
// last-level cache has them there still when the pass runs, and the hooks only add their own
// cost: a call per tensor in autograd's engine, and accumulators held across steps instead of
// built afresh beside each step's graph. A model whose small tensors outgrow the cache has the
// pass read them from memory, and the hooks save that. Measured in steps taken in turns
// (keel-bench-probe --tensors-only, BENCHMARKS.md "Steps in turns"), on Debian's libtorch 1.13:
// with the hooks, +4.2% to +5.7% at 2,000 tensors against +1.2% to +3.9% without; at 24,000
// tensors the hooks were the cheaper in both runs, at 50,000 in two runs of four. On the
// official libtorch 2.11 the pass alone was the cheaper at 50,000 tensors in both runs
// (BENCHMARKS.md "On the official libtorch 2.11"): the line is a measured guess, not settled.
// It is drawn at half the last-level cache: the pass shares it with everything else the step
// keeps there.
// Threads: any. Never: throws.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>

namespace keel::probe {

// ProbeOptions::measure_in_backward as set (true, false), or decided for these parameters
// when unset: on when the bytes of the small float32 CPU tensors the hooks would measure,
// weights and gradients, exceed half of `cache_bytes`. `swapped` as AccumulationStats takes it.
bool measures_in_backward(const std::optional<bool>& option, const std::vector<torch::Tensor>& params,
                          const std::vector<bool>& swapped, int64_t cache_bytes);

// The last-level data cache a core of this machine uses, in bytes: as sysfs reports CPU 0's,
// else as the C library reports the L3 (else L2), else 32 MiB (the machine the rule was
// measured on). Read on the first call only.
int64_t last_level_cache_bytes();

// A cache's size as sysfs writes it ("32768K", "1M", "512"), in bytes; 0 when it reads as none.
int64_t parse_cache_size(const std::string& text);

}  // namespace keel::probe
