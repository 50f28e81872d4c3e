// keel._probe: the probe's core, bound for Python. keel/probe.py wraps it in the Python API
// (keyword options, type hints, docstrings); nothing here is meant to be called directly.
//
// Every call comes from the training thread and keeps the GIL: the adapters call back into
// the model and the optimizer (PythonModel, PythonOptimizer) from inside step(). The probe's
// own threads (publisher, commands, dumps, recorder) never touch a Python object, and its
// gradient hooks are C++ hooks that take no GIL.
#include <torch/extension.h>

#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>

#include "keel/probe/probe.hpp"
#include "keel/wire/layer_metrics.hpp"
#include "message_dicts.hpp"
#include "python_model.hpp"
#include "python_optimizer.hpp"

namespace py = pybind11;
using keel::probe::Probe;
using keel::probe::ProbeOptions;
using keel::probe::ProbeTiming;
using keel::probe::StepOutcome;

namespace {

// The per-layer metrics in ProbeOptions.cadence's order (one entry each), and those read from
// the gradient: a cadence is built from these names, never from positions.
void bind_metric_names(py::module_& m) {
  py::list metric_names, gradient_metric_names;
  for (const keel::wire::LayerMetricInfo& info : keel::wire::kLayerMetrics) {
    metric_names.append(info.name);
    if (keel::wire::is_gradient_metric(info.metric)) gradient_metric_names.append(info.name);
  }
  m.attr("layer_metric_names") = metric_names;
  m.attr("gradient_metric_names") = gradient_metric_names;
}

// AttachError: the probe could not attach (keel/probe.py says what to do about it).
void bind_attach_error(py::module_& m) {
  static py::exception<keel::probe::AttachError> attach_error(m, "AttachError", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const keel::probe::AttachError& e) {
      attach_error(e.what());
    }
  });
}

// Every ProbeOptions field, by its C++ name (keel/probe.py maps its keyword arguments onto them).
void bind_options(py::module_& m) {
  py::class_<ProbeOptions> options(m, "ProbeOptions");
  options.def(py::init<>());
#define KEEL_OPTION(field) options.def_readwrite(#field, &ProbeOptions::field)
  KEEL_OPTION(endpoint);
  KEEL_OPTION(run_id);
  KEEL_OPTION(model);
  KEEL_OPTION(first_step);
  KEEL_OPTION(rank);
  KEEL_OPTION(world_size);
  KEEL_OPTION(sharded);
  KEEL_OPTION(cadence);
  KEEL_OPTION(layer_detail_above);
  KEEL_OPTION(layer_detail_every);
  KEEL_OPTION(skip_on_nonfinite);
  KEEL_OPTION(skip_on_spike);
  KEEL_OPTION(spike_window);
  KEEL_OPTION(spike_warmup);
  KEEL_OPTION(spike_z);
  KEEL_OPTION(dump_on_nonfinite);
  KEEL_OPTION(dump_nonfinite_every);
  KEEL_OPTION(rewind_every);
  KEEL_OPTION(rewind_keep);
  KEEL_OPTION(on_rewind);
  KEEL_OPTION(rewind_on_divergence);
  KEEL_OPTION(rewind_loss_factor);
  KEEL_OPTION(rewind_loss_steps);
  KEEL_OPTION(rewind_max);
  KEEL_OPTION(rewind_lr_factor);
  KEEL_OPTION(rewind_dump);
  KEEL_OPTION(forecast);
  KEEL_OPTION(warning_lr_factor);
  // on_event takes the event as the dict Probe.last_events() gives (message_dicts.hpp): a
  // wire::Event is not a Python type. pybind11's function caster holds the callable with the GIL.
  options.def_property(
      "on_event", [](const ProbeOptions& o) { return static_cast<bool>(o.on_event); },
      [](ProbeOptions& o, std::function<void(py::dict)> tell) {
        if (!tell) {
          o.on_event = nullptr;
          return;
        }
        o.on_event = [tell = std::move(tell)](const keel::wire::Event& e) {
          py::gil_scoped_acquire gil;
          tell(keel::python::event_dict(e));
        };
      });
  KEEL_OPTION(dump_dir);
  KEEL_OPTION(dump_min_interval_secs);
  KEEL_OPTION(dump_max_count);
  KEEL_OPTION(dump_min_free_bytes);
  KEEL_OPTION(record_dir);
  KEEL_OPTION(record_max_bytes);
  KEEL_OPTION(record_mantissa_bits);
  KEEL_OPTION(snapshot_for_update_ratio);
  KEEL_OPTION(measure_in_backward);
  KEEL_OPTION(queue_capacity);
  KEEL_OPTION(send_high_water_mark);
  KEEL_OPTION(describe_interval_secs);
  KEEL_OPTION(history_steps);
  KEEL_OPTION(exit_flush_secs);
  KEEL_OPTION(accept_commands);
  KEEL_OPTION(command_secret_key);
  KEEL_OPTION(allowed_client_keys);
  KEEL_OPTION(authenticate_telemetry);
  KEEL_OPTION(allow_unauthenticated_local);
  KEEL_OPTION(allow_unauthenticated_remote);
#undef KEEL_OPTION
}

// What a step did and what it cost.
void bind_outcomes(py::module_& m) {
  py::class_<StepOutcome>(m, "StepOutcome")
      .def_readonly("step", &StepOutcome::step)
      .def_readonly("applied", &StepOutcome::applied)
      .def_readonly("skip_reason", &StepOutcome::skip_reason)
      .def_readonly("nonfinite_layers", &StepOutcome::nonfinite_layers)
      .def_readonly("nonfinite_cause", &StepOutcome::nonfinite_cause)
      .def_readonly("grad_norm", &StepOutcome::grad_norm)
      .def_readonly("settled", &StepOutcome::settled)
      .def("__repr__", [](const StepOutcome& o) {
        return "StepOutcome(step=" + std::to_string(o.step) + ", applied=" + (o.applied ? "True" : "False") +
               ", skip_reason='" + o.skip_reason + "', nonfinite_layers=" + std::to_string(o.nonfinite_layers) + ")";
      });

  py::class_<ProbeTiming>(m, "ProbeTiming")
      .def_readonly("probe_us", &ProbeTiming::probe_us)
      .def_readonly("reduce_us", &ProbeTiming::reduce_us)
      .def_readonly("begin_us", &ProbeTiming::begin_us)
      .def_readonly("layout_us", &ProbeTiming::layout_us)
      .def_readonly("grads_us", &ProbeTiming::grads_us)
      .def_readonly("backward_us", &ProbeTiming::backward_us)
      .def_readonly("update_us", &ProbeTiming::update_us)
      .def_readonly("record_us", &ProbeTiming::record_us)
      .def_readonly("end_us", &ProbeTiming::end_us);
}

void bind_scaler(py::module_& m) {
  // The probe's own scaler, standing in for a torch.amp.GradScaler (keel/_amp.py).
  py::class_<keel::probe::GradScaler>(m, "GradScaler")
      .def(py::init([](double init_scale, double growth_factor, double backoff_factor, int64_t growth_interval,
                       bool enabled) {
             keel::probe::GradScalerOptions o;
             o.init_scale = init_scale;
             o.growth_factor = growth_factor;
             o.backoff_factor = backoff_factor;
             o.growth_interval = growth_interval;
             o.enabled = enabled;
             return std::make_unique<keel::probe::GradScaler>(o);
           }),
           py::kw_only(), py::arg("init_scale"), py::arg("growth_factor"), py::arg("backoff_factor"),
           py::arg("growth_interval"), py::arg("enabled"))
      .def("load_state", &keel::probe::GradScaler::load_state, py::arg("scale"), py::arg("growth_tracker"))
      .def("share_state", &keel::probe::GradScaler::share_state, py::arg("scale"), py::arg("growth_tracker"),
           py::arg("scale_value"), py::arg("growth_tracker_value"))
      .def("mark_unscaled", &keel::probe::GradScaler::mark_unscaled, py::arg("found_inf"))
      .def_property_readonly("scale_value", &keel::probe::GradScaler::scale_value)
      .def_property_readonly("growth_tracker", &keel::probe::GradScaler::growth_tracker)
      .def_property_readonly("found_inf", &keel::probe::GradScaler::found_inf);
}

void bind_local_shards(py::module_& m) {
  // keel's leaves over a model's sharded parameters (keel/_local_shards.py makes the dict), and
  // the lending of each step's gradient parts to them.
  py::class_<keel::python::LocalShards, std::shared_ptr<keel::python::LocalShards>>(m, "LocalShards")
      .def(py::init<const py::dict&>(), py::arg("leaves"))
      .def("lend_gradients", &keel::python::LocalShards::lend_gradients)
      .def("take_gradients_back", &keel::python::LocalShards::take_gradients_back);
}

void bind_probe(py::module_& m) {
  py::class_<Probe>(m, "Probe")
      .def(py::init([](py::object model, py::object optimizer, const ProbeOptions& options,
                       std::shared_ptr<keel::python::LocalShards> shards) {
             std::shared_ptr<const keel::python::LocalShards> local_shards =
                 shards ? std::move(shards) : std::make_shared<const keel::python::LocalShards>();
             return std::make_unique<Probe>(
                 std::make_unique<keel::python::PythonModel>(std::move(model), local_shards),
                 std::make_unique<keel::python::PythonOptimizer>(std::move(optimizer), local_shards), options);
           }),
           py::arg("model"), py::arg("optimizer"), py::arg("options"), py::arg("local_shards").none(true) = py::none())
      .def("step", [](Probe& p, const torch::Tensor& loss) { return p.step(loss); }, py::arg("loss"))
      .def("step_closure", [](Probe& p, const keel::probe::LossClosure& closure) { return p.step(closure); },
           py::arg("closure"))
      // The scaler lives as long as the probe that may still settle a step with it.
      .def("use_scaler", &Probe::use_scaler, py::arg("scaler").none(true), py::keep_alive<1, 2>())
      // Called from step(), on the training thread, with the GIL held (pybind's function
      // wrapper takes it anyway); None turns the agreement off.
      .def("agree_skips", &Probe::agree_skips, py::arg("agreement").none(true))
      .def("watch", &Probe::watch, py::arg("name"), py::arg("tensor"))
      .def("settle", &Probe::settle)
      .def_property_readonly("last_settled", &Probe::last_settled)
      .def_property_readonly("last_record", [](const Probe& p) { return keel::python::step_dict(p.last_record()); })
      .def_property_readonly("last_events",
                             [](const Probe& p) {
                               py::list out;
                               for (const auto& e : p.last_events()) out.append(keel::python::event_dict(e));
                               return out;
                             })
      .def_property_readonly("layer_names",
                             [](const Probe& p) {
                               std::vector<std::string> names;
                               for (const auto& layer : p.description().layers) names.push_back(layer.name);
                               return names;
                             })
      .def_property_readonly("run_id", [](const Probe& p) { return p.description().run_id; })
      .def_property_readonly("sharded", [](const Probe& p) { return p.description().sharded; })
      .def_property_readonly("last_timing", &Probe::last_timing)
      .def_property_readonly("dropped", &Probe::dropped)
      .def_property_readonly("recording_path", &Probe::recording_path)
      .def_property_readonly("bound_endpoint", &Probe::bound_endpoint)
      .def_property_readonly("bound_command_endpoint", &Probe::bound_command_endpoint);
}

}  // namespace

PYBIND11_MODULE(_probe, m) {
  m.doc() = "keel's probe core (use keel.Probe)";
  m.attr("built_with_torch") = TORCH_VERSION;
  bind_metric_names(m);
  bind_attach_error(m);
  bind_options(m);
  bind_outcomes(m);
  bind_scaler(m);
  bind_local_shards(m);
  bind_probe(m);
}
