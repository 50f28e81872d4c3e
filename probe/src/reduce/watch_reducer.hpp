// WatchReducer: statistics of watched activations (logits, attention scores, ...).
//
// What it is for: absmax, rms, mean logsumexp over the last dim (z, what z-loss penalises) and
// the non-finite count of each tensor passed to Probe::watch(), in forward order. The
// reductions are queued on the tensor's own device when watch() is called: a CPU fp32 tensor
// in one fused pass, a CUDA tensor in the fused watch kernel (one read, its result copied
// back behind an event, device_passes.hpp), anything else with ATen ops. They are read at the
// step boundary, or, for a deferred step, when it settles (take() then collect(batch)).
// Threads: the training thread only. Never: keeps a reference to the activation itself.
#pragma once

#include <string>
#include <vector>

#include <torch/torch.h>

#include <map>
#include <memory>

#include "device_passes.hpp"
#include "keel/probe/fused_reduce.hpp"
#include "keel/wire/messages.hpp"

namespace keel::probe {

class WatchReducer {
 public:
  // One watched tensor's reductions in flight.
  struct Pending {
    std::string name;
    torch::Tensor row;   // [absmax, sumsq, nonfinite, sum of logsumexp] as double (host or device)
    std::unique_ptr<DeviceWatch> device;   // instead of `row`: the CUDA kernel's result in flight
    int device_index = -1;
    double numel = 0, rows = 0;
  };
  using Batch = std::vector<Pending>;

  // Queues the reductions of `tensor`; the same name twice in a step keeps the last.
  void watch(const std::string& name, const torch::Tensor& tensor);
  // This step's watches, taken out to be read later; watch() starts the next step's.
  Batch take();
  // Resolves `batch` into `out` (forward order).
  void collect(Batch& batch, std::vector<wire::WatchStats>& out);
  // Resolves this step's watches into `out` (forward order) and forgets them.
  void collect(std::vector<wire::WatchStats>& out) {
    Batch batch = take();
    collect(batch, out);
  }
  // Every name ever watched, in order of first appearance.
  const std::vector<std::string>& names() const { return names_; }

 private:
  Batch pending_;
  std::map<int, std::vector<std::unique_ptr<DeviceWatch>>> idle_;   // per CUDA device, for reuse
  std::vector<std::string> names_;
  FusedReducer fused_;
  std::vector<ConstSpan> span_;
  std::vector<GradStats> stats_;
};

}  // namespace keel::probe
