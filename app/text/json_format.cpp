#include "text/json_format.hpp"

#include <charconv>
#include <cmath>
#include <cstdlib>

#include "keel/wire/codec.hpp"
#include "keel/wire/message_fields.hpp"

namespace keel::app {
namespace {

using Json = nlohmann::ordered_json;
namespace wire = keel::wire;

Json non_finite(double value) {
  if (std::isnan(value)) return "nan";
  return value > 0 ? "inf" : "-inf";
}

Json metric_value(wire::LayerMetric metric, float value) {
  // A count travels as float32 with the other metrics; print it as the integer it is.
  if (wire::is_count(metric) && std::isfinite(value)) return static_cast<int64_t>(std::llround(value));
  return json_number(value);
}

// `no_gradient`: why the step has no gradient for the layer ("frozen", "unused"), or null.
Json layer_json(const wire::StepRecord& step, uint32_t layer, const LayerNames& names, const char* no_gradient) {
  Json out;
  out["name"] = names.name(step, layer);
  if (no_gradient) out["no_gradient"] = no_gradient;
  for (int m = 0; m < wire::kLayerMetricCount; ++m) {
    const auto metric = static_cast<wire::LayerMetric>(m);
    if (step.metric_block(metric) < 0) continue;
    out[wire::layer_metric_name(metric)] = metric_value(metric, step.layer_value(metric, layer));
  }
  return out;
}

// The per-layer block: one object per layer, named, with each metric sent and why a layer had
// no gradient. A rollup step has none: its layers would be thousands of names without a value.
Json layers_json(const wire::StepRecord& step, const LayerNames& names) {
  std::vector<const char*> no_gradient(step.layer_count, nullptr);
  for (uint32_t layer : step.unused_layers) {
    if (layer < step.layer_count) no_gradient[layer] = "unused";
  }
  for (uint32_t layer : step.frozen_layers) {
    if (layer < step.layer_count) no_gradient[layer] = "frozen";
  }
  const bool rollup = step.metric_mask == 0 && step.module_mask != 0;
  Json layers = Json::array();
  for (uint32_t i = 0; i < step.layer_count && !rollup; ++i) layers.push_back(layer_json(step, i, names, no_gradient[i]));
  return layers;
}

// A rollup step's modules: each one's worst layer's value of every metric sent (their sum for
// grad_nonfinite), named by the run's description.
Json modules_json(const wire::StepRecord& step, const LayerNames& names) {
  Json modules = Json::array();
  for (uint32_t k = 0; k < step.module_count && step.module_mask != 0; ++k) {
    Json entry;
    entry["name"] = names.module_name(step, k);
    for (int m = 0; m < wire::kLayerMetricCount; ++m) {
      const auto metric = static_cast<wire::LayerMetric>(m);
      const int block = step.module_block(metric);
      const size_t at = size_t(block) * step.module_count + k;
      if (block < 0 || at >= step.module_values.size()) continue;
      entry[wire::layer_metric_name(metric)] = metric_value(metric, step.module_values[at]);
    }
    modules.push_back(std::move(entry));
  }
  return modules;
}

Json buffers_json(const wire::StepRecord& step, const LayerNames& names) {
  Json buffers = Json::array();
  for (uint32_t i = 0; i < step.buffer_absmax.size(); ++i) {
    buffers.push_back(Json{{"name", names.buffer_name(step, i)}, {"absmax", json_number(step.buffer_absmax[i])}});
  }
  return buffers;
}

// A float block as objects that name their values (the run's layers, modules, buffers).
Json block_json(wire::FloatBlock block, const wire::StepRecord* step, const LayerNames* names) {
  if (!step || !names) return Json::array();
  switch (block) {
    case wire::FloatBlock::kLayers: return layers_json(*step, *names);
    case wire::FloatBlock::kModules: return modules_json(*step, *names);
    case wire::FloatBlock::kBuffers: return buffers_json(*step, *names);
    case wire::FloatBlock::kNone: break;
  }
  return Json::array();
}

template <typename T>
Json value_json(const T& value);

// Every field of a table, under its wire name and in its order: a line of one type always has
// the same keys, whatever its message left out on the wire.
struct FieldsJson {
  Json& out;
  const wire::StepRecord* step;   // the message, when it is a step: its blocks are named
  const LayerNames* names;        // with `step`
  template <typename T>
  void operator()(const wire::Field<T>& f) const {
    if constexpr (std::is_same_v<std::remove_const_t<T>, std::vector<float>>) {
      out[f.name] = block_json(f.block, step, names);
    } else {
      out[f.name] = value_json(*f.value);
    }
  }
};

template <typename T>
Json value_json(const T& value) {
  if constexpr (std::is_floating_point_v<T>) {
    return json_number(value);
  } else if constexpr (std::is_arithmetic_v<T> || std::is_same_v<T, std::string>) {
    return value;
  } else if constexpr (wire::is_vector_v<T>) {
    Json items = Json::array();
    for (const auto& item : value) items.push_back(value_json(item));
    return items;
  } else if constexpr (wire::is_optional_v<T>) {
    return value ? value_json(*value) : Json(nullptr);
  } else {
    Json out = Json::object();
    wire::for_each_field(value, FieldsJson{out, nullptr, nullptr});
    return out;
  }
}

template <typename M>
Json message_json(const M& message, const char* type, const LayerNames& names) {
  Json out;
  out["type"] = type;
  const wire::StepRecord* step = nullptr;
  if constexpr (std::is_same_v<M, wire::StepRecord>) step = &message;
  wire::for_each_header_field(message, FieldsJson{out, step, &names});
  wire::for_each_field(message, FieldsJson{out, step, &names});
  // The one alias: every other line names its run "run", and scripts key every line by it.
  if constexpr (std::is_same_v<M, wire::RunDescription>) out["run"] = message.run_id;
  return out;
}

}  // namespace

Json json_number(double value) {
  if (!std::isfinite(value)) return non_finite(value);
  return value;
}

Json json_number(float value) {
  if (!std::isfinite(value)) return non_finite(value);
  // Widening 0.1f gives 0.100000001490116..., which JSON would print in full. The shortest
  // decimal that round-trips the float, read back as a double, prints as the user expects.
  char text[32];
  const std::to_chars_result written = std::to_chars(text, text + sizeof text - 1, value);
  *written.ptr = '\0';
  return std::strtod(text, nullptr);
}

Json to_json(const wire::Message& message, const LayerNames& names) {
  return std::visit([&](const auto& m) { return message_json(m, wire::topic_of(message), names); }, message);
}

std::string to_json_line(const wire::Message& message, const LayerNames& names) {
  return to_json(message, names).dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace keel::app
