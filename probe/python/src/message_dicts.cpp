#include "message_dicts.hpp"

#include <pybind11/stl.h>

#include <type_traits>

#include "keel/wire/message_fields.hpp"

namespace py = pybind11;

namespace keel::python {
namespace {

// One block's values by metric, each metric sent a list of `count` values.
py::dict values_by_metric(const std::vector<float>& values, uint32_t mask, uint32_t count) {
  py::dict out;
  int block = 0;
  for (int m = 0; m < wire::kLayerMetricCount; ++m) {
    if (!(mask & (1u << m))) continue;
    const size_t first = size_t(block++) * count;
    if (first + count > values.size()) break;
    out[wire::layer_metric_name(static_cast<wire::LayerMetric>(m))] =
        std::vector<float>(values.begin() + first, values.begin() + first + count);
  }
  return out;
}

py::object block_value(wire::FloatBlock block, const wire::StepRecord* step, const std::vector<float>& values) {
  switch (block) {
    case wire::FloatBlock::kLayers:
      if (step) return values_by_metric(values, step->metric_mask, step->layer_count);
      break;
    case wire::FloatBlock::kModules:
      if (step) return values_by_metric(values, step->module_mask, step->module_count);
      break;
    case wire::FloatBlock::kBuffers:
    case wire::FloatBlock::kNone: break;
  }
  return py::cast(values);
}

template <typename T>
py::object value_of(const T& value);

struct FieldsDict {
  py::dict& out;
  const wire::StepRecord* step;   // the message, when it is a step: its blocks are shaped by its masks
  template <typename T>
  void operator()(const wire::Field<T>& f) const {
    if constexpr (std::is_same_v<std::remove_const_t<T>, std::vector<float>>) {
      out[f.name] = block_value(f.block, step, *f.value);
    } else {
      out[f.name] = value_of(*f.value);
    }
  }
};

template <typename T>
py::object value_of(const T& value) {
  if constexpr (std::is_same_v<T, std::vector<wire::WatchStats>>) {
    py::dict by_name;
    for (const wire::WatchStats& watch : value) {
      py::dict stats = py::reinterpret_borrow<py::dict>(value_of(watch));
      PyDict_DelItemString(stats.ptr(), "name");
      by_name[py::str(watch.name)] = stats;
    }
    return std::move(by_name);
  } else if constexpr (wire::is_vector_v<T>) {
    py::list items;
    for (const auto& item : value) items.append(value_of(item));
    return std::move(items);
  } else if constexpr (wire::is_optional_v<T>) {
    return value ? value_of(*value) : py::none();
  } else if constexpr (wire::has_fields_v<T>) {
    py::dict out;
    wire::for_each_field(value, FieldsDict{out, nullptr});
    return std::move(out);
  } else {
    return py::cast(value);
  }
}

template <typename M>
py::dict message_dict(const M& message, const wire::StepRecord* step) {
  py::dict out;
  wire::for_each_header_field(message, FieldsDict{out, step});
  wire::for_each_field(message, FieldsDict{out, step});
  return out;
}

}  // namespace

py::dict step_dict(const wire::StepRecord& record) {
  py::dict out = message_dict(record, &record);
  out["frozen_layers"] = out["frozen"];
  out["unused_layers"] = out["unused"];
  return out;
}

py::dict event_dict(const wire::Event& event) { return message_dict(event, nullptr); }

}  // namespace keel::python
