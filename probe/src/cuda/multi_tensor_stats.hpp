// multi_tensor_stats: the passes of the CUDA probe, each one kernel launch for every tensor on
// a device (plus one small launch that folds the chunks per tensor): the gradient pass, and
// the update pass that rebuilds each weight's update from the optimizer's state.
//
// What it is for: the per-layer gradient statistics (stats_math.hpp) of every tensor of a pass,
// with the loss-scaler unscale fused in, without a host sync: it only enqueues work on the
// stream it is given (libtorch's current stream), and the caller copies `out` to the host
// asynchronously. Compiled by nvcc; this header includes no CUDA or torch header, so the
// torch-side code that calls it compiles with g++ alone.
// Threads: any host thread; the stream orders the work. Never: synchronises with the device,
// allocates (every buffer is the caller's), or throws (it returns the CUDA error code).
#pragma once

#include <cstdint>

#include "chunk_plan.hpp"
#include "stats_math.hpp"
#include "step_verdict.hpp"
#include "update_math.hpp"

namespace keel::probe::cuda {

// One row of the tensor table (device memory): a tensor's data this step.
struct TensorRef {
  void* data = nullptr;
  int64_t numel = 0;
  ElementType type = ElementType::kFloat32;
  int32_t unused = 0;
};

// Buffers of one pass, all in device memory and owned by the caller:
//   tensors[tensor_count], chunks[chunk_count] and where[tensor_count] (the plan), read;
//   partials[chunk_count], scratch; out[tensor_count], the result per tensor.
template <class Ref, class Accumulator>
struct MultiTensorPass {
  const Ref* tensors = nullptr;
  const Chunk* chunks = nullptr;
  const TensorChunks* where = nullptr;
  Accumulator* partials = nullptr;
  Accumulator* out = nullptr;
  int32_t tensor_count = 0;
  int32_t chunk_count = 0;
};

using GradPass = MultiTensorPass<TensorRef, GradAccumulator>;

// Enqueues the pass on `stream` (a cudaStream_t). With inv_scale != 1 every element is first
// multiplied by it in place. Returns 0 (cudaSuccess) or the launch's CUDA error code.
int enqueue_grad_stats(const GradPass& pass, float inv_scale, void* stream);

// One row of the update pass's table: a weight after the optimizer's step, the state its rule
// reads (same element type as the weight; `second` may be null), and the rule's coefficients.
struct UpdateRef {
  const void* weight = nullptr;
  const void* first = nullptr;
  const void* second = nullptr;
  int64_t numel = 0;
  ElementType type = ElementType::kFloat32;
  int32_t unused = 0;
  UpdateCoefficients coefficients;
};
// The tables are re-uploaded only when their bytes change (device_passes.cpp): no unnamed
// padding, whose bytes are indeterminate.
static_assert(sizeof(TensorRef) == 24 && sizeof(UpdateRef) == 80, "table rows must have no unnamed padding");

using UpdatePass = MultiTensorPass<UpdateRef, UpdateAccumulator>;

// Enqueues the update pass on `stream`: per tensor |dW|^2, |W_old|^2 and |W_new|^2 rebuilt
// from the state (update_math.hpp). Reads only. Returns 0 or the launch's CUDA error code.
int enqueue_update_stats(const UpdatePass& pass, void* stream);

// Enqueues the step's verdict (step_verdict.hpp) after a gradient pass: folds its per-tensor
// results `per_tensor[count]` and the loss (`loss`: one fp32 value, or null when there is
// none) and writes found_inf_value() to `found_inf[0]`, and to `found_inf[1]` whether a
// gradient value was non-finite (a loss scaler's overflow). One block; reads and writes device
// memory only. Returns 0 or the launch's CUDA error code.
int enqueue_step_verdict(const GradAccumulator* per_tensor, int32_t count, const float* loss, double max_sumsq,
                         float* found_inf, void* stream);

// The text of a CUDA error code, for the probe's error events.
const char* cuda_error_text(int code);

}  // namespace keel::probe::cuda
