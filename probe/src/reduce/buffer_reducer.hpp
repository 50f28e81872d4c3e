// BufferReducer: max |b| of each of the model's floating-point buffers, once a step.
//
// What it is for: the buffers' check (model_buffers.hpp). Cheap, since buffers are small: CPU
// float32 contiguous buffers in one FusedReducer pass; dense CUDA buffers in one fused launch
// per device (the gradient pass's kernel, device_passes.hpp), read behind an event; anything
// else with ATen ops on its own device. In two halves, as the layers' reductions: enqueue()
// starts the pass, collect() reads it, waiting only where the device has not finished, so a
// deferred step collects a step later with no wait. absmax is NaN when a buffer holds a NaN
// and +Inf when it holds an Inf (and no NaN): that is the non-finite check.
// Threads: the training thread only.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include <torch/torch.h>

#include "device_passes.hpp"
#include "keel/probe/fused_reduce.hpp"

namespace keel::probe {

class BufferReducer {
 public:
  BufferReducer() = default;
  explicit BufferReducer(std::vector<torch::Tensor> buffers);

  size_t size() const { return buffers_.size(); }
  // Starts this step's pass over every buffer. Throws std::runtime_error when a device
  // launch fails; then nothing is pending.
  void enqueue();
  // Whether an enqueue() has not been collected yet.
  bool pending() const { return pending_; }
  // The last enqueue's max |b|, one per buffer in order. Throws std::logic_error with
  // nothing pending.
  void collect(std::vector<float>& absmax);

 private:
  struct DevicePart {
    std::vector<size_t> buffers;   // indices into buffers_ of this device's pass
    std::vector<torch::Tensor> tensors;
    std::unique_ptr<DeviceGradPass> pass;
  };
  std::vector<torch::Tensor> buffers_;
  std::map<int, DevicePart> devices_;
  std::vector<float> host_;   // the host-measured buffers' results, written by enqueue()
  std::vector<size_t> generic_;   // buffers measured with ATen ops on a device (read at collect)
  std::vector<torch::Tensor> generic_rows_;   // their max |b| on their device, one per entry of generic_
  FusedReducer fused_;
  std::vector<ConstSpan> spans_;
  std::vector<size_t> span_of_;
  std::vector<GradStats> stats_;
  bool pending_ = false;
};

}  // namespace keel::probe
