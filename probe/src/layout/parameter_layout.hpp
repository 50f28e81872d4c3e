// ParameterLayout: the model's parameters as the probe planned its layers for them, and what
// has changed since.
//
// What it is for: a model changes after attach. to(kCUDA) left the CPU kernels reading device
// memory, to(kBFloat16) made every step's reduction throw, a replaced parameter was measured
// through its stale handle and an added one never. Compared once per step, before the step is
// planned: the parameter set by name and tensor identity, and per parameter its device, type
// and shape (the layout: a change means the layers are planned again), and its storage and
// version counter (its values: written outside the step, so a copy of them is stale).
// Threads: the training thread. Never: touches tensor values, throws for a tensor's kind.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <c10/util/SmallVector.h>
#include <torch/torch.h>

#include "model_parameters.hpp"

namespace keel::probe {

struct LayoutChange {
  bool layout = false;    // the parameter set, or a parameter's device, type or shape changed
  bool weights = false;   // some weight was written since remember_weights() (values only)
  std::string what;       // when `layout`: "fc1.weight replaced; temperature added", for the event
};

class ParameterLayout {
 public:
  // `params` as parameters_of gave them, `sequence` as parameter_sequence gave it then.
  ParameterLayout(const NamedParams& params, std::vector<const void*> sequence);

  // The cheap check of every step: the same tensors in the same places (`sequence` now) and
  // each planned tensor (`params`, in the planned order) on the same device, with the same
  // type and shape. True: nothing but their values may have changed, and, with
  // `compare_values`, `change` says whether they did (without, the version counters are not
  // read and `change.weights` stays false: for a caller that trusts nothing it kept of them).
  // False: compare() must say what changed.
  bool unchanged(const std::vector<const void*>& sequence, const std::vector<torch::Tensor>& params,
                 LayoutChange& change, bool compare_values = true) const;
  // unchanged() in two parts, for a caller that reads each tensor on its way elsewhere (the
  // gradient walk, which has it in cache then): the same tensors in the same places, then
  // each planned tensor `t` of layer `k` in turn, with `weights_written` set when its values
  // changed (read only with `compare_values`).
  bool same_sequence(const std::vector<const void*>& sequence, size_t planned_count) const {
    return planned_count == entries_.size() && sequence == sequence_;
  }
  bool same_tensor(size_t k, const torch::Tensor& t, bool compare_values, bool& weights_written) const;
  // What differs between the planned parameters and `now` (parameters_of the model).
  LayoutChange compare(const NamedParams& now) const;
  // The tensors' sequence as it is now (an unchanged layout seen by compare(): the optimizer
  // lists a parameter in another place), so that the next steps' cheap check holds again.
  void remember_sequence(const std::vector<const void*>& sequence) { sequence_ = sequence; }
  // The weights as they are now are the step's own (after the optimizer's step): only a write
  // after this reads as `weights` to compare(). `params` in the planned order.
  void remember_weights(const std::vector<torch::Tensor>& params);

 private:
  struct Entry {
    std::string name;
    const void* tensor = nullptr;   // identity: the planned tensor is held by the probe, never reused
    c10::Device device = c10::Device(c10::kCPU);
    c10::ScalarType dtype = c10::ScalarType::Undefined;
    // Held inline up to 5 dimensions: compared every step, and a vector's elements are one more
    // allocation per tensor to wait on (the gradient walk at 2,000 tensors, temporary timers,
    // four interleaved pairs of runs: 294-357 us with a vector, 317-324 us inline).
    c10::SmallVector<int64_t, 5> sizes;
    // Its values: a write bumps the version counter, set_data or set_ swaps the storage.
    struct Values {
      const void* storage = nullptr;
      int64_t storage_offset = 0;
      int64_t version = -1;
      bool operator!=(const Values& o) const {
        return storage != o.storage || storage_offset != o.storage_offset || version != o.version;
      }
    } values;
  };
  static Entry entry_of(const std::string& name, const torch::Tensor& t);
  static Entry::Values values_of(const torch::Tensor& t);
  static void prefetch_ahead(const std::vector<torch::Tensor>& params, size_t k);
  std::vector<Entry> entries_;
  std::vector<const void*> sequence_;
};

}  // namespace keel::probe
