#include "python_model.hpp"

#include <utility>

#include "python_tensor.hpp"

namespace py = pybind11;

namespace keel::python {
namespace {

// A tensor's name as the model's user knows it: without the modules FSDP (FSDP1) and activation
// checkpointing wrap theirs in, as FSDP's state_dict() leaves them out, and without the
// `_orig_mod` of a submodule compiled on its own (torch.compile; keel/_unwrap.py unwraps a
// compiled model as a whole).
std::string without_wrappers(std::string name) {
  for (const std::string wrapper : {"_fsdp_wrapped_module.", "_checkpoint_wrapped_module.", "_orig_mod."}) {
    for (size_t at = name.find(wrapper); at != std::string::npos; at = name.find(wrapper, at)) {
      // A whole segment only: a user's `my_orig_mod.weight` keeps its name.
      if (at == 0 || name[at - 1] == '.') {
        name.erase(at, wrapper.size());
      } else {
        at += wrapper.size();
      }
    }
  }
  return name;
}

// `shards`: the parameters' (a DTensor's leaf in its place, a flat parameter's parts under
// their own names); none for the buffers.
void named_pairs(const py::object& items, const char* what, const LocalShards* shards, probe::NamedTensors& out) {
  out.clear();
  for (py::handle item : items) {
    const auto pair = item.cast<py::tuple>();
    if (shards == nullptr) {
      out.emplace_back(without_wrappers(pair[0].cast<std::string>()), tensor_of(pair[1], what));
      continue;
    }
    shards->each_measured(pair[1], what, [&](const LocalShards::Measured& m) {
      out.emplace_back(without_wrappers(m.name.empty() ? pair[0].cast<std::string>() : m.name), m.tensor);
    });
  }
}

// The dicts nn.Module keeps in its __dict__, read with the C API: walked at every step, where
// the pybind11 spelling of the same walk (attribute, values(), an iterator per dict) made the
// layout stage 122 us a step on keel-demo's 33 modules, and this one 73 (keel-bench-py).
enum class ModuleDict { kParameters, kBuffers, kModules };

PyObject* dict_of(PyObject* module, ModuleDict which) {
  static const char* const kNames[] = {"_parameters", "_buffers", "_modules"};
  static PyObject* const kInterned[] = {PyUnicode_InternFromString(kNames[0]), PyUnicode_InternFromString(kNames[1]),
                                        PyUnicode_InternFromString(kNames[2])};
  const auto at = static_cast<size_t>(which);
  PyObject* dict = PyObject_GetAttr(module, kInterned[at]);
  if (dict == nullptr) throw py::error_already_set();
  if (!PyDict_Check(dict)) {
    Py_DECREF(dict);
    throw std::invalid_argument(std::string("keel: a module's ") + kNames[at] + " is not a dict");
  }
  return dict;   // a new reference
}

// Pre-order, as named_modules(remove_duplicate=False): each module's own parameters (and
// floating buffers), then its children's.
void walk(PyObject* module, const LocalShards& shards, std::vector<const void*>& params,
          std::vector<const void*>* float_buffers) {
  PyObject* key = nullptr;
  PyObject* value = nullptr;
  Py_ssize_t at = 0;
  const py::object parameters = py::reinterpret_steal<py::object>(dict_of(module, ModuleDict::kParameters));
  while (PyDict_Next(parameters.ptr(), &at, &key, &value)) {
    if (value == Py_None) continue;
    shards.each_measured(value, "a parameter",
                         [&](const LocalShards::Measured& m) { params.push_back(m.tensor.unsafeGetTensorImpl()); });
  }
  if (float_buffers != nullptr) {
    const py::object buffers = py::reinterpret_steal<py::object>(dict_of(module, ModuleDict::kBuffers));
    at = 0;
    while (PyDict_Next(buffers.ptr(), &at, &key, &value)) {
      if (value == Py_None) continue;
      const torch::Tensor& t = tensor_of(value, "a buffer");
      if (t.is_floating_point()) float_buffers->push_back(t.unsafeGetTensorImpl());
    }
  }
  const py::object children = py::reinterpret_steal<py::object>(dict_of(module, ModuleDict::kModules));
  at = 0;
  while (PyDict_Next(children.ptr(), &at, &key, &value)) {
    if (value != Py_None) walk(value, shards, params, float_buffers);
  }
}

// Every buffer, integer ones too, in named_buffers(remove_duplicate=False)'s order: the
// closure form saves them at every step.
void all_buffers(PyObject* module, std::vector<torch::Tensor>& out) {
  PyObject* key = nullptr;
  PyObject* value = nullptr;
  Py_ssize_t at = 0;
  const py::object buffers = py::reinterpret_steal<py::object>(dict_of(module, ModuleDict::kBuffers));
  while (PyDict_Next(buffers.ptr(), &at, &key, &value)) {
    if (value != Py_None) out.push_back(tensor_of(value, "a buffer"));
  }
  const py::object children = py::reinterpret_steal<py::object>(dict_of(module, ModuleDict::kModules));
  at = 0;
  while (PyDict_Next(children.ptr(), &at, &key, &value)) {
    if (value != Py_None) all_buffers(value, out);
  }
}

}  // namespace

PythonModel::PythonModel(py::object module, std::shared_ptr<const LocalShards> shards)
    : module_(std::move(module)), shards_(std::move(shards)) {
  if (!py::isinstance(module_, py::module_::import("torch.nn").attr("Module"))) {
    throw std::invalid_argument("keel: the model is not a torch.nn.Module");
  }
}

void PythonModel::named_parameters(probe::NamedTensors& out) {
  named_pairs(module_.attr("named_parameters")(py::arg("remove_duplicate") = false), "a parameter", shards_.get(), out);
}

void PythonModel::named_buffers(probe::NamedTensors& out) {
  named_pairs(module_.attr("named_buffers")(py::arg("remove_duplicate") = false), "a buffer", nullptr, out);
}

void PythonModel::buffers(std::vector<torch::Tensor>& out) {
  out.clear();
  all_buffers(module_.ptr(), out);
}

void PythonModel::identities(std::vector<const void*>& params, std::vector<const void*>* float_buffers) {
  params.clear();
  if (float_buffers) float_buffers->clear();
  walk(module_.ptr(), *shards_, params, float_buffers);
}

bool PythonModel::data_swapped(const torch::Tensor& param) const {
  if (shards_->is_leaf(param)) return true;
  const py::object object = object_of(param);
  return py::hasattr(object, "_is_flat_param") && py::bool_(object.attr("_is_flat_param"));
}

std::string PythonModel::serialise() {
  py::object buffer = py::module_::import("io").attr("BytesIO")();
  py::module_::import("torch").attr("save")(module_.attr("state_dict")(), buffer);
  return buffer.attr("getvalue")().cast<std::string>();
}

}  // namespace keel::python
