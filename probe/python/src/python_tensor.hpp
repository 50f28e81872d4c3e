// The tensor of a Python object, without pybind11's generic cast (the probe reads every
// parameter at every step).
// Threads: holding the GIL.
#pragma once

#include <stdexcept>
#include <string>

#include <pybind11/pybind11.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/torch.h>

namespace keel::python {

inline bool is_tensor(pybind11::handle object) { return THPVariable_Check(object.ptr()); }

// Throws std::invalid_argument naming `what` when the object is not a tensor.
inline const torch::Tensor& tensor_of(pybind11::handle object, const char* what) {
  if (!is_tensor(object)) throw std::invalid_argument(std::string("keel: ") + what + " is not a torch.Tensor");
  return THPVariable_Unpack(object.ptr());
}

// The Python object of a tensor: the same object the model holds when it has one.
inline pybind11::object object_of(const torch::Tensor& tensor) {
  return pybind11::reinterpret_steal<pybind11::object>(THPVariable_Wrap(tensor));
}

}  // namespace keel::python
