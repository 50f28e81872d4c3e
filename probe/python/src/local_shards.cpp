#include "local_shards.hpp"

#include <stdexcept>
#include <string>

#include "python_tensor.hpp"

namespace py = pybind11;

namespace keel::python {

LocalShards::LocalShards(const py::dict& leaves) {
  for (const auto& [parameter, leaf] : leaves) {
    const torch::Tensor& tensor = tensor_of(leaf, "a local shard");
    by_parameter_.emplace(parameter.ptr(), tensor);
    by_leaf_.emplace(tensor.unsafeGetTensorImpl(), py::reinterpret_borrow<py::object>(parameter));
  }
}

const torch::Tensor& LocalShards::measured(py::handle object, const char* what) const {
  if (!by_parameter_.empty()) {
    const auto leaf = by_parameter_.find(object.ptr());
    if (leaf != by_parameter_.end()) return leaf->second;
  }
  const torch::Tensor& tensor = tensor_of(object, what);
  // A tensor subclass that dispatches in Python (DTensor's kind) holds no data keel can read:
  // said here, instead of as the reductions' "data is not allocated yet".
  if (tensor.key_set().has(c10::DispatchKey::Python)) {
    const auto type = py::type::of(object).attr("__name__").cast<std::string>();
    throw std::invalid_argument(std::string("keel: ") + what + " is a " + type +
                                ", whose data keel cannot read: a DTensor made after keel attached (attach keel "
                                "after fully_shard or parallelize_module)");
  }
  return tensor;
}

py::object LocalShards::parameter_of(const torch::Tensor& measured) const {
  if (!by_leaf_.empty()) {
    const auto parameter = by_leaf_.find(measured.unsafeGetTensorImpl());
    if (parameter != by_leaf_.end()) return parameter->second;
  }
  return object_of(measured);
}

torch::Tensor LocalShards::local_data(py::handle object, const char* what) {
  const torch::Tensor& tensor = tensor_of(object, what);
  if (tensor.has_storage() || !py::hasattr(object, "_local_tensor")) return tensor;
  return tensor_of(object.attr("_local_tensor"), what);
}

}  // namespace keel::python
