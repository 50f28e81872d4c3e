// LocalShards: the tensors keel measures in place of DTensor parameters (FSDP2's fully_shard,
// tensor parallelism).
//
// What it is for: a DTensor holds no data of its own. This rank's part of it is a plain tensor
// inside it (_local_tensor), and its gradient is a new DTensor every step. keel/_local_shards.py
// makes, at attach, a leaf of keel's own over each such part's storage, hands it each step's
// gradient part before the step and takes it back after. The probe's core then sees plain
// tensors whose identity stays put, whose weights the optimizer's in-place update changes, and
// whose gradient is this rank's. PythonModel and PythonOptimizer read every parameter through
// this, so both name the same tensors (and optimizer.state is found by the DTensor).
// Threads: the training thread, holding the GIL. Never: touches tensor values.
#pragma once

#include <unordered_map>

#include <pybind11/pybind11.h>
#include <torch/torch.h>

namespace keel::python {

class LocalShards {
 public:
  LocalShards() = default;
  // {DTensor parameter: keel's leaf over its local part}; an empty dict for a model without.
  explicit LocalShards(const pybind11::dict& leaves);
  // The tensor keel measures for the parameter `object`: its leaf when it is a DTensor seen at
  // attach, else the tensor itself. Throws std::invalid_argument naming `what` for a tensor
  // subclass that dispatches in Python (a DTensor made after keel attached).
  const torch::Tensor& measured(pybind11::handle object, const char* what) const;
  // The parameter object a measured tensor stands for: optimizer.state's key.
  pybind11::object parameter_of(const torch::Tensor& measured) const;
  // Whether `tensor` is one of keel's leaves: no gradient accumulator of its own ever receives
  // a gradient (backward reaches the DTensor), so the probe measures it after backward.
  bool is_leaf(const torch::Tensor& tensor) const { return by_leaf_.count(tensor.unsafeGetTensorImpl()) != 0; }
  // A tensor of optimizer.state as data: a DTensor's local part, else the tensor.
  static torch::Tensor local_data(pybind11::handle object, const char* what);

 private:
  std::unordered_map<PyObject*, torch::Tensor> by_parameter_;
  std::unordered_map<const void*, pybind11::object> by_leaf_;   // the DTensor of each leaf (held)
};

}  // namespace keel::python
