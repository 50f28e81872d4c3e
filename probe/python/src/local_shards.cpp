#include "local_shards.hpp"

#include <stdexcept>
#include <string>

#include "python_tensor.hpp"

namespace py = pybind11;

namespace keel::python {

LocalShards::LocalShards(const py::dict& leaves) {
  for (const auto& [parameter, leaf] : leaves) {
    std::vector<Measured>& measured = by_parameter_[parameter.ptr()];
    const py::object owner = py::reinterpret_borrow<py::object>(parameter);
    if (!py::isinstance<py::list>(leaf)) {
      const torch::Tensor& tensor = tensor_of(leaf, "a local shard");
      measured.push_back({tensor, std::string()});
      by_leaf_.emplace(tensor.unsafeGetTensorImpl(), Owner{owner, -1});
      continue;
    }
    for (py::handle part : leaf.cast<py::list>()) {
      const auto fields = part.cast<py::tuple>();
      const torch::Tensor& tensor = tensor_of(fields[1], "a flat parameter's part");
      measured.push_back({tensor, fields[0].cast<std::string>()});
      by_leaf_.emplace(tensor.unsafeGetTensorImpl(), Owner{owner, fields[2].cast<int64_t>()});
    }
  }
}

const torch::Tensor& LocalShards::plain(py::handle object, const char* what) {
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
    const auto owner = by_leaf_.find(measured.unsafeGetTensorImpl());
    if (owner != by_leaf_.end()) return owner->second.parameter;
  }
  return object_of(measured);
}

torch::Tensor LocalShards::state_part(const torch::Tensor& measured, const torch::Tensor& state) const {
  if (!state.defined() || by_leaf_.empty()) return state;
  const auto owner = by_leaf_.find(measured.unsafeGetTensorImpl());
  if (owner == by_leaf_.end() || owner->second.offset < 0) return state;
  // The state of a flat parameter is shaped as its shard: the part's slice of it. Any other
  // shape is no state the part's update could be read from.
  const int64_t end = owner->second.offset + measured.numel();
  if (state.dim() != 1 || state.numel() < end) return torch::Tensor();
  return state.narrow(0, owner->second.offset, measured.numel());
}

torch::Tensor LocalShards::local_data(py::handle object, const char* what) {
  const torch::Tensor& tensor = tensor_of(object, what);
  if (tensor.has_storage() || !py::hasattr(object, "_local_tensor")) return tensor;
  return tensor_of(object.attr("_local_tensor"), what);
}

}  // namespace keel::python
