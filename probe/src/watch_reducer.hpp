// WatchReducer: statistics of watched activations (logits, attention scores, ...).
//
// What it is for: absmax, rms, mean logsumexp over the last dim (z, what z-loss penalises) and
// the non-finite count of each tensor passed to Probe::watch(), in forward order. The
// reductions are queued on the tensor's own device when watch() is called and read back once,
// at the step boundary.
// Threads: the training thread only. Never: keeps a reference to the activation itself.
#pragma once

#include <string>
#include <vector>

#include <torch/torch.h>

#include "keel/probe/fused_reduce.hpp"
#include "keel/wire/messages.hpp"

namespace keel::probe {

class WatchReducer {
 public:
  // Queues the reductions of `tensor`; the same name twice in a step keeps the last.
  void watch(const std::string& name, const torch::Tensor& tensor);
  // Resolves this step's watches into `out` (forward order) and forgets them.
  void collect(std::vector<wire::WatchStats>& out);
  // Every name ever watched, in order of first appearance.
  const std::vector<std::string>& names() const { return names_; }

 private:
  struct Pending {
    std::string name;
    torch::Tensor row;   // [absmax, sumsq, nonfinite, sum of logsumexp, numel, rows] as double
  };
  std::vector<Pending> pending_;
  std::vector<std::string> names_;
  FusedReducer fused_;
  std::vector<ConstSpan> span_;
  std::vector<GradStats> stats_;
};

}  // namespace keel::probe
