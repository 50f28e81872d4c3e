#include "cli/json_format.hpp"

#include <charconv>
#include <cmath>
#include <cstdlib>

#include "keel/wire/codec.hpp"

namespace keel::app {
namespace {

using Json = nlohmann::ordered_json;
namespace wire = keel::wire;

Json non_finite(double value) {
  if (std::isnan(value)) return "nan";
  return value > 0 ? "inf" : "-inf";
}

Json run_json(const wire::RunDescription& run) {
  Json layers = Json::array();
  for (const wire::LayerInfo& layer : run.layers) {
    Json entry{{"name", layer.name}, {"shape", layer.shape}, {"numel", layer.numel}, {"dtype", layer.dtype}};
    if (!layer.aliases.empty()) entry["aliases"] = layer.aliases;
    layers.push_back(std::move(entry));
  }
  Json out;
  out["type"] = wire::kTopicRun;
  out["run"] = run.run_id;
  out["model"] = run.model;
  out["rank"] = run.rank;
  out["world_size"] = run.world_size;
  out["seq"] = run.seq;
  out["layers"] = std::move(layers);
  if (!run.modules.empty()) {
    Json modules = Json::array();
    for (const wire::ModuleRange& module : run.modules) {
      modules.push_back(Json{{"name", module.name}, {"first", module.first}, {"count", module.count}});
    }
    out["modules"] = std::move(modules);
  }
  out["watches"] = run.watches;
  out["buffers"] = run.buffers;
  out["device"] = run.device;
  out["keel_version"] = run.keel_version;
  out["torch_version"] = run.torch_version;
  out["start_unix_ms"] = run.start_unix_ms;
  if (run.policies_on) out["policies_on"] = *run.policies_on;
  if (run.sharded) out["sharded"] = true;   // each rank measures its shards (PROTOCOL §3.2)
  return out;
}

// `no_gradient`: why the step has no gradient for the layer ("frozen", "unused"), or null.
Json layer_json(const wire::StepRecord& step, uint32_t layer, const LayerNames& names, const char* no_gradient) {
  Json out;
  out["name"] = names.name(step, layer);
  if (no_gradient) out["no_gradient"] = no_gradient;
  for (int m = 0; m < wire::kLayerMetricCount; ++m) {
    const auto metric = static_cast<wire::LayerMetric>(m);
    if (step.metric_block(metric) < 0) continue;
    const float value = step.layer_value(metric, layer);
    // A count travels as float32 with the other metrics; print it as the integer it is.
    if (wire::is_count(metric) && std::isfinite(value)) {
      out[wire::layer_metric_name(metric)] = static_cast<int64_t>(std::llround(value));
    } else {
      out[wire::layer_metric_name(metric)] = json_number(value);
    }
  }
  return out;
}

// A rollup step's modules: each one's worst layer's value of every metric sent (their sum for
// grad_nonfinite), named by the run's description.
Json modules_json(const wire::StepRecord& step, const LayerNames& names) {
  Json modules = Json::array();
  for (uint32_t k = 0; k < step.module_count; ++k) {
    Json entry;
    entry["name"] = names.module_name(step, k);
    for (int m = 0; m < wire::kLayerMetricCount; ++m) {
      const auto metric = static_cast<wire::LayerMetric>(m);
      const int block = step.module_block(metric);
      const size_t at = size_t(block) * step.module_count + k;
      if (block < 0 || at >= step.module_values.size()) continue;
      const float value = step.module_values[at];
      if (wire::is_count(metric) && std::isfinite(value)) {
        entry[wire::layer_metric_name(metric)] = static_cast<int64_t>(std::llround(value));
      } else {
        entry[wire::layer_metric_name(metric)] = json_number(value);
      }
    }
    modules.push_back(std::move(entry));
  }
  return modules;
}

Json step_json(const wire::StepRecord& step, const LayerNames& names) {
  std::vector<const char*> no_gradient(step.layer_count, nullptr);
  for (uint32_t layer : step.unused_layers) {
    if (layer < step.layer_count) no_gradient[layer] = "unused";
  }
  for (uint32_t layer : step.frozen_layers) {
    if (layer < step.layer_count) no_gradient[layer] = "frozen";
  }
  // A rollup step has no layer values: its layers would be thousands of names without a value.
  const bool rollup = step.metric_mask == 0 && step.module_mask != 0;
  Json layers = Json::array();
  for (uint32_t i = 0; i < step.layer_count && !rollup; ++i) layers.push_back(layer_json(step, i, names, no_gradient[i]));
  Json scaler = nullptr;
  if (step.scaler) {
    scaler = Json{{"scale", json_number(step.scaler->scale)},
                  {"growth_tracker", step.scaler->growth_tracker},
                  {"found_inf", step.scaler->found_inf},
                  {"skipped_total", step.scaler->skipped_total}};
  }
  Json watches = Json::array();
  for (const wire::WatchStats& watch : step.watches) {
    watches.push_back(Json{{"name", watch.name},
                           {"absmax", json_number(watch.absmax)},
                           {"rms", json_number(watch.rms)},
                           {"z", json_number(watch.z)},
                           {"nonfinite", watch.nonfinite}});
  }
  Json out;
  out["type"] = wire::kTopicStep;
  out["step"] = step.step;
  out["run"] = step.run;
  out["model"] = step.model;
  out["rank"] = step.rank;
  out["seq"] = step.seq;
  out["loss"] = json_number(step.loss);
  out["lr"] = json_number(step.lr);
  if (!step.group_lrs.empty()) {
    Json lrs = Json::array();
    for (double lr : step.group_lrs) lrs.push_back(json_number(lr));
    out["group_lrs"] = std::move(lrs);
  }
  out["grad_norm"] = json_number(step.grad_norm);
  out["skipped"] = step.skipped;
  out["skip_reason"] = step.skip_reason;
  if (!step.cause.empty()) out["cause"] = step.cause;
  out["step_time_us"] = json_number(step.step_time_us);
  out["probe_us"] = json_number(step.probe_us);
  out["dropped"] = step.dropped;
  out["probe_errors"] = step.probe_errors;
  out["stamp_unix_ns"] = step.stamp_unix_ns;
  out["layers"] = std::move(layers);
  if (step.module_mask != 0) out["modules"] = modules_json(step, names);
  out["scaler"] = std::move(scaler);
  out["watch"] = std::move(watches);
  Json buffers = Json::array();
  for (uint32_t i = 0; i < step.buffer_absmax.size(); ++i) {
    buffers.push_back(Json{{"name", names.buffer_name(step, i)}, {"absmax", json_number(step.buffer_absmax[i])}});
  }
  out["buffers"] = std::move(buffers);
  return out;
}

Json event_json(const wire::Event& event) {
  Json out;
  out["type"] = wire::kTopicEvent;
  out["kind"] = event.kind;
  out["step"] = event.step;
  out["run"] = event.run;
  out["model"] = event.model;
  out["rank"] = event.rank;
  out["seq"] = event.seq;
  out["layer"] = event.layer;
  out["detail"] = event.detail;
  out["stamp_unix_ns"] = event.stamp_unix_ns;
  if (event.cause) {
    out["cause"] = Json{{"kind", event.cause->kind},
                        {"op", event.cause->op},
                        {"module", event.cause->module},
                        {"evidence", event.cause->evidence},
                        {"sentence", event.cause->sentence}};
  }
  return out;
}

Json command_json(const wire::Command& command) {
  Json out;
  out["type"] = wire::kTopicCommand;
  out["kind"] = command.kind;
  out["id"] = command.id;
  out["rank"] = command.rank;
  out["seq"] = command.seq;
  out["count"] = command.count;
  out["label"] = command.label;
  out["policy"] = command.policy;
  out["enable"] = command.enable;
  return out;
}

Json ack_json(const wire::Ack& ack) {
  Json out;
  out["type"] = wire::kTopicAck;
  out["id"] = ack.id;
  out["run"] = ack.run;
  out["model"] = ack.model;
  out["rank"] = ack.rank;
  out["seq"] = ack.seq;
  out["ok"] = ack.ok;
  out["step"] = ack.step;
  out["error"] = ack.error;
  out["path"] = ack.path;
  out["bytes"] = ack.bytes;
  out["count"] = ack.count;
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
  struct Visitor {
    const LayerNames& names;
    Json operator()(const wire::RunDescription& run) const { return run_json(run); }
    Json operator()(const wire::StepRecord& step) const { return step_json(step, names); }
    Json operator()(const wire::Event& event) const { return event_json(event); }
    Json operator()(const wire::Command& command) const { return command_json(command); }
    Json operator()(const wire::Ack& ack) const { return ack_json(ack); }
  };
  return std::visit(Visitor{names}, message);
}

std::string to_json_line(const wire::Message& message, const LayerNames& names) {
  return to_json(message, names).dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace keel::app
