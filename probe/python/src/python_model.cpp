#include "python_model.hpp"

#include <utility>

#include "python_tensor.hpp"

namespace py = pybind11;

namespace keel::python {
namespace {

void named_pairs(const py::object& items, const char* what, probe::NamedTensors& out) {
  out.clear();
  for (py::handle item : items) {
    const auto pair = item.cast<py::tuple>();
    out.emplace_back(pair[0].cast<std::string>(), tensor_of(pair[1], what));
  }
}

// Pre-order, as named_modules(remove_duplicate=False): each module's own parameters (and
// floating buffers), then its children's.
void walk(py::handle module, std::vector<const void*>& params, std::vector<const void*>* float_buffers) {
  for (py::handle value : module.attr("_parameters").attr("values")()) {
    if (!value.is_none()) params.push_back(tensor_of(value, "a parameter").unsafeGetTensorImpl());
  }
  if (float_buffers != nullptr) {
    for (py::handle value : module.attr("_buffers").attr("values")()) {
      if (value.is_none()) continue;
      const torch::Tensor& t = tensor_of(value, "a buffer");
      if (t.is_floating_point()) float_buffers->push_back(t.unsafeGetTensorImpl());
    }
  }
  for (py::handle child : module.attr("_modules").attr("values")()) {
    if (!child.is_none()) walk(child, params, float_buffers);
  }
}

}  // namespace

PythonModel::PythonModel(py::object module) : module_(std::move(module)) {
  if (!py::isinstance(module_, py::module_::import("torch.nn").attr("Module"))) {
    throw std::invalid_argument("keel: the model is not a torch.nn.Module");
  }
}

void PythonModel::named_parameters(probe::NamedTensors& out) {
  named_pairs(module_.attr("named_parameters")(py::arg("remove_duplicate") = false), "a parameter", out);
}

void PythonModel::named_buffers(probe::NamedTensors& out) {
  named_pairs(module_.attr("named_buffers")(py::arg("remove_duplicate") = false), "a buffer", out);
}

void PythonModel::buffers(std::vector<torch::Tensor>& out) {
  out.clear();
  for (py::handle item : module_.attr("named_buffers")(py::arg("remove_duplicate") = false)) {
    out.push_back(tensor_of(item.cast<py::tuple>()[1], "a buffer"));
  }
}

void PythonModel::identities(std::vector<const void*>& params, std::vector<const void*>* float_buffers) {
  params.clear();
  if (float_buffers) float_buffers->clear();
  walk(module_, params, float_buffers);
}

std::string PythonModel::serialise() {
  py::object buffer = py::module_::import("io").attr("BytesIO")();
  py::module_::import("torch").attr("save")(module_.attr("state_dict")(), buffer);
  return buffer.attr("getvalue")().cast<std::string>();
}

}  // namespace keel::python
