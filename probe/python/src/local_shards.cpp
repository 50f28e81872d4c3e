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
      measured.push_back({tensor, fields[0].cast<std::string>(), fields[2].cast<int64_t>()});
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

namespace {

// As Tensor.grad's setter checks an assigned gradient: the leaf's shape, dtype and device.
void check_lendable(const torch::Tensor& leaf, const torch::Tensor& grad) {
  if (!grad.sizes().equals(leaf.sizes()) || grad.scalar_type() != leaf.scalar_type() ||
      grad.device() != leaf.device()) {
    throw std::invalid_argument("keel: a sharded parameter's gradient part (" + grad.toString() + " " +
                                c10::str(grad.sizes()) + ") does not match keel's leaf over its data (" +
                                leaf.toString() + " " + c10::str(leaf.sizes()) + ")");
  }
}

}  // namespace

void LocalShards::lend_gradients() const {
  try {
    lend_each_gradient();
  } catch (...) {
    take_gradients_back();   // none lent to some leaves and not to others
    throw;
  }
}

void LocalShards::lend_each_gradient() const {
  // Interned once and never released: a static py::str would be released after the
  // interpreter is gone, at exit.
  static const py::handle kGrad = py::str("grad").release();
  for (const auto& [parameter, leaves] : by_parameter_) {
    if (leaves.empty()) continue;
    const py::object grad = py::reinterpret_borrow<py::object>(parameter).attr(kGrad);
    if (leaves.front().offset < 0) {
      // A DTensor's leaf: its gradient's local part.
      const torch::Tensor& leaf = leaves.front().tensor;
      if (grad.is_none()) {
        leaf.mutable_grad() = torch::Tensor();
        continue;
      }
      torch::Tensor part = local_data(grad, "a DTensor's gradient");
      check_lendable(leaf, part);
      leaf.mutable_grad() = std::move(part);
      continue;
    }
    // A flat parameter's parts: their slices of the flat gradient, when it is the shard's.
    const torch::Tensor* flat = grad.is_none() ? nullptr : &tensor_of(grad, "a flat parameter's gradient");
    const bool usable = flat != nullptr && flat->numel() == tensor_of(parameter, "a flat parameter").numel();
    for (const Measured& part : leaves) {
      if (!usable) {
        part.tensor.mutable_grad() = torch::Tensor();
        continue;
      }
      torch::Tensor slice = flat->narrow(0, part.offset, part.tensor.numel());
      check_lendable(part.tensor, slice);
      part.tensor.mutable_grad() = std::move(slice);
    }
  }
}

void LocalShards::take_gradients_back() const {
  for (const auto& entry : by_parameter_) {
    for (const Measured& leaf : entry.second) leaf.tensor.mutable_grad() = torch::Tensor();
  }
}

torch::Tensor LocalShards::local_data(py::handle object, const char* what) {
  const torch::Tensor& tensor = tensor_of(object, what);
  // A DTensor is a subclass that dispatches in Python. Its storage does not tell: on torch 2.11
  // a DTensor has one (of its global shape), and taken as the data it was the whole
  // parameter's size, not this rank's part's.
  static const py::handle kLocalTensor = py::str("_local_tensor").release();   // as kGrad, above
  if (!tensor.key_set().has(c10::DispatchKey::Python) || !py::hasattr(object, kLocalTensor)) return tensor;
  return tensor_of(object.attr(kLocalTensor), what);
}

}  // namespace keel::python
