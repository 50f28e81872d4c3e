// all_finite: whether a tensor holds no NaN or Inf, as cheaply as a read of its bytes.
//
// What it is for: the origin tracer asks it of every op's outputs while a step runs again.
// ATen's isfinite(t).all() makes bool tensors in several passes: 230-390 us for keel-demo's
// 196k-float activations on this 2-core machine, which made a traced re-run 20 times a forward
// and backward. A CPU tensor of a floating dtype is read here in one pass over its exponent
// bits (a value is NaN or Inf exactly when they are all set), stopping at the first block that
// has one. Other tensors (a GPU's) go through ATen, whose result is read back (a wait).
// Threads: any. Never: throws (a check that fails reads as finite: never an origin).
#pragma once

#include <ATen/ATen.h>

namespace keel::probe {

bool all_finite(const at::Tensor& t);

}  // namespace keel::probe
