// RerunPoint: what running a step again needs to repeat it exactly, saved before the step.
//
// What it is for: the closure form (Probe::step(closure)) runs an unsafe step's closure a
// second time to trace where its NaN was born. That run must see what the first one saw: the
// same weights (the update is not applied yet), the same batch (the closure holds it), the
// same random numbers (dropout) and the same buffers (BatchNorm's running statistics and
// batch count, which the first forward pass has already moved). A NaN that does not come back on such a run is
// transient. After the re-run the state is put back as the first run left it, so the rest of
// the run goes on as if there had been no second one.
// Cost on a normal step: each generator's state read (a few KB for the CPU's) and a copy of
// the buffers into tensors kept across steps (no allocation once they exist).
// Threads: the training thread. Never: touches parameters or gradients.
#pragma once

#include <vector>

#include <torch/torch.h>

namespace keel::probe {

class RerunPoint {
 public:
  // Saves the random state of the CPU and of each CUDA device in `devices`, and the values of
  // `buffers` (all the model's buffers, integer ones too).
  void capture(const std::vector<torch::Tensor>& buffers, const std::vector<c10::Device>& devices);
  // Puts back what capture() saved; throws what libtorch throws (the caller reports it).
  void restore() const;
  bool captured() const { return !generators_.empty(); }

 private:
  std::vector<at::Generator> generators_;
  std::vector<at::Tensor> states_;
  std::vector<torch::Tensor> buffers_;   // the model's own tensors
  std::vector<torch::Tensor> copies_;    // their values at capture()
};

}  // namespace keel::probe
