// LocalShards: the tensors keel measures in place of sharded parameters: DTensors (FSDP2's
// fully_shard, tensor parallelism) and FSDP1's flat parameters.
//
// What it is for: a DTensor holds no data of its own. This rank's part of it is a plain tensor
// inside it (_local_tensor), and its gradient is a new DTensor every step. An FSDP1 flat
// parameter holds a slice of a whole wrapped unit's parameters, one after another, under FSDP's
// name. keel/_local_shards.py makes, at attach, leaves of keel's own: one over each DTensor's
// local part, and one over each original parameter's part of a flat parameter's shard (named as
// the model's state_dict() names it). This class lends them each step's gradient part before
// the step and takes it back after. The probe's core then sees plain tensors whose identity stays put,
// whose weights the optimizer's in-place update changes, and whose gradient is this rank's.
// PythonModel and PythonOptimizer read every parameter through this, so both name the same
// tensors (and optimizer.state is found by the parameter, a flat one's state by the part's
// slice of it).
// Threads: the training thread, holding the GIL. Never: touches tensor values.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include <pybind11/pybind11.h>
#include <torch/torch.h>

namespace keel::python {

class LocalShards {
 public:
  // A tensor keel measures for a parameter: the leaf, and for a flat parameter's part its name
  // (empty for a DTensor's leaf, which keeps its parameter's).
  struct Measured {
    torch::Tensor tensor;
    std::string name;
    int64_t offset = -1;   // a flat parameter's part: where it starts in the shard; -1 a DTensor's leaf
  };

  LocalShards() = default;
  // {DTensor parameter: keel's leaf over its local part, flat parameter: [(name, leaf, offset
  // in the shard)]}; an empty dict for a model with neither.
  explicit LocalShards(const pybind11::dict& leaves);

  // Calls each(const Measured&) for every tensor keel measures for the parameter `object`:
  // its leaves when it is a DTensor or a flat parameter seen at attach, else the tensor itself
  // (with no name). Throws std::invalid_argument naming `what` for a tensor subclass that
  // dispatches in Python (a DTensor made after keel attached).
  template <class Each>
  void each_measured(pybind11::handle object, const char* what, Each&& each) const {
    if (!by_parameter_.empty()) {
      const auto leaves = by_parameter_.find(object.ptr());
      if (leaves != by_parameter_.end()) {
        for (const Measured& leaf : leaves->second) each(leaf);
        return;
      }
    }
    each(Measured{plain(object, what), std::string()});
  }
  // The parameter object a measured tensor stands for: optimizer.state's key.
  pybind11::object parameter_of(const torch::Tensor& measured) const;
  // Of a tensor of the parameter's optimizer.state (as data: local_data), the part that is the
  // measured tensor's: a flat parameter part's slice of a state shaped as the shard (undefined
  // for a state of another shape), else the whole tensor.
  torch::Tensor state_part(const torch::Tensor& measured, const torch::Tensor& state) const;
  // Whether `tensor` is one of keel's leaves: no gradient accumulator of its own ever receives
  // a gradient (backward reaches the parameter), so the probe measures it after backward.
  bool is_leaf(const torch::Tensor& tensor) const { return by_leaf_.count(tensor.unsafeGetTensorImpl()) != 0; }
  // A tensor of optimizer.state as data: a DTensor's local part, else the tensor.
  static torch::Tensor local_data(pybind11::handle object, const char* what);

  // Before the step: each leaf's gradient is its parameter's this step, without a copy: a
  // DTensor's local part, or a flat parameter part's slice of the flat gradient (none when the
  // parameter has none, or a flat gradient of another size than the shard, which FSDP1 keeps
  // whole under no_sync: the parts read as not updated). Throws std::invalid_argument, as
  // Tensor.grad's setter would, for a gradient of another shape, dtype or device than its leaf,
  // with no leaf left holding a gradient.
  // In C++ because it runs at every step for every part: in Python it took 4 ms a step at 2,000
  // parts, four times the probe's own time there (BENCHMARKS.md, "Lending sharded gradients").
  void lend_gradients() const;
  // After the step: no leaf holds a gradient, so none outlives the user's zero_grad().
  void take_gradients_back() const;

 private:
  // The parameter a leaf stands for (held), and for a flat parameter's part where it starts in
  // the shard (-1: a DTensor's leaf, the whole local part).
  struct Owner {
    pybind11::object parameter;
    int64_t offset = -1;
  };
  static const torch::Tensor& plain(pybind11::handle object, const char* what);
  // lend_gradients' loop; it takes every gradient back when this throws.
  void lend_each_gradient() const;

  std::unordered_map<PyObject*, std::vector<Measured>> by_parameter_;
  std::unordered_map<const void*, Owner> by_leaf_;
};

}  // namespace keel::python
