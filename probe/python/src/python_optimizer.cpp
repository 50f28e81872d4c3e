#include "python_optimizer.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "python_tensor.hpp"

namespace py = pybind11;

namespace keel::python {
namespace {

probe::OptimizerKind kind_of(const py::object& optimizer) {
  const py::module_ optim = py::module_::import("torch.optim");
  // AdamW first: recent torch makes it a subclass of Adam.
  if (py::isinstance(optimizer, optim.attr("AdamW"))) return probe::OptimizerKind::kAdamW;
  if (py::isinstance(optimizer, optim.attr("Adam"))) return probe::OptimizerKind::kAdam;
  if (py::isinstance(optimizer, optim.attr("SGD"))) return probe::OptimizerKind::kSgd;
  return probe::OptimizerKind::kOther;
}

// A hyperparameter as a double: torch.optim takes a tensor lr too.
double number(const py::handle& value) {
  if (is_tensor(value)) return tensor_of(value, "a hyperparameter").item<double>();
  return value.cast<double>();
}

// A dict's item, or a null handle when it has none (or None): read with the C API, at every
// step, with no key object built.
py::handle item_of(const py::dict& dict, const char* key) {
  PyObject* value = PyDict_GetItemString(dict.ptr(), key);   // borrowed
  return value == Py_None ? py::handle() : py::handle(value);
}

double number_or(const py::dict& group, const char* key, double otherwise) {
  const py::handle value = item_of(group, key);
  return value ? number(value) : otherwise;
}

bool flag_or(const py::dict& group, const char* key, bool otherwise) {
  const py::handle value = item_of(group, key);
  return value ? value.cast<bool>() : otherwise;
}

probe::GroupHyperparameters hyperparameters_of(const py::dict& group, probe::OptimizerKind kind) {
  probe::GroupHyperparameters h;
  h.lr = number_or(group, "lr", 0.0);
  h.weight_decay = number_or(group, "weight_decay", 0.0);
  h.maximize = flag_or(group, "maximize", false);
  if (kind == probe::OptimizerKind::kSgd) {
    h.momentum = number_or(group, "momentum", 0.0);
    h.dampening = number_or(group, "dampening", 0.0);
    h.nesterov = flag_or(group, "nesterov", false);
  } else if (kind != probe::OptimizerKind::kOther) {
    if (const py::handle value = item_of(group, "betas")) {
      const auto betas = value.cast<py::tuple>();
      h.beta1 = number(betas[0]);
      h.beta2 = number(betas[1]);
    }
    h.eps = number_or(group, "eps", h.eps);
    h.amsgrad = flag_or(group, "amsgrad", false);
  }
  return h;
}

// A DTensor parameter's state is DTensors too: their local parts, as the parameter's leaf. A
// flat parameter's is shaped as its shard: `param`'s part of it.
torch::Tensor tensor_or_none(const py::dict& state, const char* key, const LocalShards& shards,
                             const torch::Tensor& param) {
  if (!state.contains(key) || state[key].is_none()) return torch::Tensor();
  return shards.state_part(param, LocalShards::local_data(state[key], key));
}

}  // namespace

PythonOptimizer::PythonOptimizer(py::object optimizer, std::shared_ptr<const LocalShards> shards)
    : optimizer_(std::move(optimizer)), shards_(std::move(shards)) {
  if (!py::isinstance(optimizer_, py::module_::import("torch.optim").attr("Optimizer"))) {
    throw std::invalid_argument("keel: the optimizer is not a torch.optim.Optimizer");
  }
  kind_ = kind_of(optimizer_);
}

void PythonOptimizer::begin_step() {
  const py::list groups = optimizer_.attr("param_groups");
  groups_.resize(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    const py::dict group = groups[g];
    Group& mirror = groups_[g];
    // The list as a sequence of the C API (a list or a tuple), and each tensor replaced only
    // where it changed: read at every step.
    const py::object params = py::reinterpret_steal<py::object>(
        PySequence_Fast(py::object(group["params"]).ptr(), "keel: a parameter group's params is not a sequence"));
    if (!params) throw py::error_already_set();
    const Py_ssize_t count = PySequence_Fast_GET_SIZE(params.ptr());
    PyObject** items = PySequence_Fast_ITEMS(params.ptr());
    // A flat parameter stands for its parts, each a tensor of the group.
    size_t at = 0;
    for (Py_ssize_t k = 0; k < count; ++k) {
      shards_->each_measured(items[k], "a parameter of the optimizer", [&](const LocalShards::Measured& m) {
        if (at == mirror.params.size()) mirror.params.emplace_back();
        torch::Tensor& kept = mirror.params[at++];
        if (!kept.is_same(m.tensor)) kept = m.tensor;
      });
    }
    mirror.params.resize(at);
    mirror.hyper = hyperparameters_of(group, kind_);
    mirror.fused = flag_or(group, "fused", false);
    mirror.capturable = flag_or(group, "capturable", false);
  }
  const bool adam = kind_ == probe::OptimizerKind::kAdam || kind_ == probe::OptimizerKind::kAdamW;
  counts_on_device_ = adam && std::any_of(groups_.begin(), groups_.end(),
                                          [](const Group& g) { return g.fused || g.capturable; });
}

probe::ParamStateView PythonOptimizer::state_of(const torch::Tensor& param) const {
  probe::ParamStateView view;
  const py::object found = optimizer_.attr("state").attr("get")(shards_->parameter_of(param));
  if (found.is_none()) return view;
  const py::dict state = found;
  if (state.size() == 0) return view;
  view.present = true;
  if (const py::handle step = item_of(state, "step")) {
    // A count kept on the host (count_device_steps), while the state holds the tensor it was
    // read from; else the state's own (a number, or a tensor on the host).
    const auto kept = step_counts_.find(param.unsafeGetTensorImpl());
    if (kept != step_counts_.end() && is_tensor(step) && kept->second.step_tensor.is_same(tensor_of(step, "step"))) {
      view.step = kept->second.count;
    } else {
      view.step = static_cast<int64_t>(number(step));
    }
  }
  view.exp_avg = tensor_or_none(state, "exp_avg", *shards_, param);
  view.exp_avg_sq = tensor_or_none(state, "exp_avg_sq", *shards_, param);
  view.max_exp_avg_sq = tensor_or_none(state, "max_exp_avg_sq", *shards_, param);
  view.momentum_buffer = tensor_or_none(state, "momentum_buffer", *shards_, param);
  return view;
}

void PythonOptimizer::step() {
  optimizer_.attr("step")();
  count_device_steps(/*deferred=*/false);
}

void PythonOptimizer::count_device_steps(bool deferred) {
  counted_unsettled_.clear();
  if (!counts_on_device_) return;
  const py::object state = optimizer_.attr("state");
  if (!PyDict_Check(state.ptr())) return;   // not torch.optim's own: state_of reads it as it is
  for (const Group& group : groups_) {
    if (!group.fused && !group.capturable) continue;
    for (const torch::Tensor& p : group.params) {
      if (!p.grad().defined()) continue;   // passed by: not stepped
      PyObject* entry = PyDict_GetItem(state.ptr(), shards_->parameter_of(p).ptr());   // borrowed
      if (entry == nullptr || !PyDict_Check(entry)) continue;
      const py::handle step = item_of(py::reinterpret_borrow<py::dict>(entry), "step");
      if (!step || !is_tensor(step)) continue;   // a number: state_of reads it with no wait
      const torch::Tensor& step_tensor = tensor_of(step, "step");
      StepCount& kept = step_counts_[p.unsafeGetTensorImpl()];
      if (kept.step_tensor.is_same(step_tensor)) {
        ++kept.count;
        if (deferred) counted_unsettled_.push_back(&kept);
      } else {
        // A step tensor not seen before (the first step, or a loaded state): read once, after
        // this step (a deferred one's taken back already if the device skipped it).
        kept.step_tensor = step_tensor;
        kept.count = static_cast<int64_t>(step_tensor.item<double>());
      }
    }
  }
}

bool PythonOptimizer::supports_deferred_step(const torch::Device& device, std::string& why) {
  if (kind_ == probe::OptimizerKind::kOther) {
    why = "the optimizer is not torch.optim's AdamW, Adam or SGD";
    return false;
  }
  if (!py::hasattr(optimizer_, "_step_supports_amp_scaling") ||
      !optimizer_.attr("_step_supports_amp_scaling").cast<bool>()) {
    why = "the optimizer's step does not read found_inf (torch.optim's fused=True steps do)";
    return false;
  }
  for (const Group& group : groups_) {
    if (!group.fused) {
      why = "a parameter group is not fused (fused=True)";
      return false;
    }
    for (const torch::Tensor& p : group.params) {
      if (p.grad().defined() && p.device() != device) {
        why = "a parameter is not on the device of the others";
        return false;
      }
    }
  }
  return true;
}

void PythonOptimizer::deferred_step(const torch::Tensor& found_inf) {
  enqueued_ = false;
  std::string why;
  if (!supports_deferred_step(found_inf.device(), why)) throw std::runtime_error("keel: deferred step: " + why);
  // As torch.amp.GradScaler hands a fused step its verdict: the gradients are unscaled already.
  optimizer_.attr("grad_scale") = py::none();
  optimizer_.attr("found_inf") = object_of(found_inf);
  enqueued_ = true;
  try {
    optimizer_.attr("step")();
  } catch (...) {
    py::delattr(optimizer_, "grad_scale");
    py::delattr(optimizer_, "found_inf");
    throw;
  }
  py::delattr(optimizer_, "grad_scale");
  py::delattr(optimizer_, "found_inf");
  count_device_steps(/*deferred=*/true);
}

void PythonOptimizer::settle_deferred_step(bool applied) {
  if (!applied) {
    for (StepCount* kept : counted_unsettled_) --kept->count;
  }
  counted_unsettled_.clear();
}

std::string PythonOptimizer::serialise() {
  py::object buffer = py::module_::import("io").attr("BytesIO")();
  py::module_::import("torch").attr("save")(optimizer_.attr("state_dict")(), buffer);
  return buffer.attr("getvalue")().cast<std::string>();
}

const std::vector<const char*>& PythonOptimizer::state_keys() const {
  static const std::vector<const char*> adam{"exp_avg", "exp_avg_sq", "max_exp_avg_sq", "step"};
  static const std::vector<const char*> sgd{"momentum_buffer"};
  return kind_ == probe::OptimizerKind::kSgd ? sgd : adam;
}

bool PythonOptimizer::state_tensors(std::vector<probe::OptimizerStateTensors>& out, std::string& why) {
  out.clear();
  const auto refuse = [&](std::string reason) {
    out.clear();
    why = std::move(reason);
    return false;
  };
  if (kind_ == probe::OptimizerKind::kOther) return refuse("the optimizer is not torch.optim's AdamW, Adam or SGD");
  const py::object state = optimizer_.attr("state");
  if (!PyDict_Check(state.ptr())) return refuse("the optimizer's state is not torch.optim's own");
  const std::vector<const char*>& keys = state_keys();
  for (const Group& group : groups_) {
    for (const torch::Tensor& p : group.params) {
      const py::object param = shards_->parameter_of(p);
      if (!is_tensor(param) || !tensor_of(param, "a parameter").is_same(p)) {
        return refuse("a sharded parameter (FSDP, DTensor), whose state its state_dict lays out");
      }
      probe::OptimizerStateTensors& entry = out.emplace_back();
      PyObject* found = PyDict_GetItem(state.ptr(), param.ptr());   // borrowed
      if (found == nullptr || !PyDict_Check(found) || PyDict_Size(found) == 0) continue;
      const auto s = py::reinterpret_borrow<py::dict>(found);
      size_t known = 0;
      for (const char* key : keys) {
        const py::handle value = item_of(s, key);
        known += s.contains(key);
        if (value && !is_tensor(value)) return refuse(std::string("a parameter's state holds '") + key + "' as a number");
        entry.tensors.push_back(value ? tensor_of(value, key) : torch::Tensor());
      }
      if (known != static_cast<size_t>(s.size())) return refuse("a parameter's state holds a key keel does not know");
      // The host's count where it keeps one for this step tensor; 0: none (read again after a
      // restore). Never read from a device here.
      entry.count = 0;
      const auto kept = step_counts_.find(p.unsafeGetTensorImpl());
      if (kind_ != probe::OptimizerKind::kSgd && kept != step_counts_.end() && entry.tensors.back().defined() &&
          kept->second.step_tensor.is_same(entry.tensors.back())) {
        entry.count = kept->second.count;
      }
    }
  }
  return true;
}

void PythonOptimizer::restore_state_tensors(const std::vector<probe::OptimizerStateTensors>& from) {
  const std::vector<const char*>& keys = state_keys();
  size_t n = 0;
  for (const Group& group : groups_) n += group.params.size();
  if (n != from.size()) {
    throw std::runtime_error("keel: the optimizer steps " + std::to_string(n) + " tensors, the snapshot holds " +
                             std::to_string(from.size()));
  }
  for (const probe::OptimizerStateTensors& entry : from) {
    if (entry.count >= 0 && entry.tensors.size() != keys.size()) {
      throw std::runtime_error("keel: a snapshot's optimizer state is not of this optimizer's kind");
    }
  }
  const py::object state = optimizer_.attr("state");
  const torch::NoGradGuard no_grad;
  size_t i = 0;
  for (const Group& group : groups_) {
    for (const torch::Tensor& p : group.params) {
      const probe::OptimizerStateTensors& entry = from[i++];
      const py::object param = shards_->parameter_of(p);
      step_counts_.erase(p.unsafeGetTensorImpl());
      if (entry.count < 0) {
        if (PyDict_Contains(state.ptr(), param.ptr()) == 1) state.attr("pop")(param);
        continue;
      }
      // torch.optim's state is a defaultdict(dict): indexing makes the parameter's entry.
      py::dict s = state[param];
      for (size_t k = 0; k < keys.size(); ++k) {
        const torch::Tensor& host = entry.tensors[k];
        const bool step = std::string(keys[k]) == "step";
        const py::handle live = item_of(s, keys[k]);
        if (!host.defined()) {
          // None (SGD's momentum_buffer without momentum) and no key read alike.
          if (live) PyDict_DelItemString(s.ptr(), keys[k]);
          continue;
        }
        if (live && is_tensor(live)) {
          const torch::Tensor& t = tensor_of(live, keys[k]);
          if (t.sizes() == host.sizes() && t.dtype() == host.dtype()) {
            t.copy_(host);
            if (step && entry.count > 0) step_counts_[p.unsafeGetTensorImpl()] = StepCount{t, entry.count};
            continue;
          }
        }
        const torch::Device device = step && !group.fused && !group.capturable ? torch::Device(torch::kCPU) : p.device();
        torch::Tensor fresh = torch::empty(host.sizes(), host.options().device(device));
        fresh.copy_(host);
        s[keys[k]] = object_of(fresh);
        if (step && entry.count > 0) step_counts_[p.unsafeGetTensorImpl()] = StepCount{fresh, entry.count};
      }
    }
  }
}

void PythonOptimizer::restore_serialised(const std::string& bytes) {
  py::object buffer = py::module_::import("io").attr("BytesIO")(py::bytes(bytes));
  optimizer_.attr("load_state_dict")(py::module_::import("torch").attr("load")(buffer));
}

void PythonOptimizer::scale_learning_rates(double factor) {
  const py::object tensor_type = py::module_::import("torch").attr("Tensor");
  for (py::handle group : optimizer_.attr("param_groups")) {
    py::object lr = group["lr"];
    if (py::isinstance(lr, tensor_type)) {
      lr.attr("mul_")(factor);
    } else {
      group["lr"] = lr.cast<double>() * factor;
    }
  }
}

}  // namespace keel::python
