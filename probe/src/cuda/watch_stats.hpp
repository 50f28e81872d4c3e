// watch_stats: the watched tensor's pass (watch_math.hpp) on a CUDA device: one read of a
// [rows, cols] tensor gives absmax, sum of squares, the non-finite count and the sum over rows
// of log-sum-exp, with no temporary the size of the tensor (one small record per row).
//
// What it is for: Probe::watch() on the logits, which ATen reduces today with several
// tensor-sized temporaries and a copy back that waits. Two launches: one block per row, then
// one block folding the rows in row order (no atomics: the result repeats bit for bit).
// Compiled by nvcc; this header includes no CUDA or torch header.
// Threads: any host thread; the stream orders the work. Never: synchronises with the device,
// allocates (the buffers are the caller's), or throws (it returns the CUDA error code).
#pragma once

#include <cstdint>

#include "watch_math.hpp"

namespace keel::probe::cuda {

struct WatchPass {
  const void* data = nullptr;   // rows * cols elements, dense, row-major
  ElementType type = ElementType::kFloat32;
  int64_t rows = 0;
  int64_t cols = 0;
  RowStats* row_out = nullptr;  // device memory, `rows` records (scratch)
  WatchTotals* out = nullptr;   // device memory, one record: the result
};

// Enqueues the pass on `stream` (a cudaStream_t). Returns 0 or the launch's CUDA error code.
int enqueue_watch_stats(const WatchPass& pass, void* stream);

}  // namespace keel::probe::cuda
