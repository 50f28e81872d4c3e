#include "text/table_format.hpp"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <variant>

#include "keel/wire/vocabulary.hpp"
#include "values/warning_numbers.hpp"

namespace keel::app {
namespace {

namespace wire = keel::wire;

std::string printf_string(const char* format, ...) __attribute__((format(printf, 1, 2)));

std::string printf_string(const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list measure;
  va_copy(measure, args);
  const int length = std::vsnprintf(nullptr, 0, format, measure);
  va_end(measure);
  std::string out(length > 0 ? static_cast<size_t>(length) : 0, '\0');
  if (length > 0) std::vsnprintf(out.data(), out.size() + 1, format, args);
  va_end(args);
  return out;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

constexpr const char* kStepRowFormat = "%8s %4s %12s %12s  %-20s %9s %8s  %s";

}  // namespace

std::string terminal_safe(const std::string& text) {
  std::string out = text;
  for (char& c : out) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) c = '?';
  }
  return out;
}

std::string format_value(double value, int significant_digits) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return printf_string("%.*g", significant_digits, value);
}

std::string format_run(const wire::RunDescription& run) {
  const std::string model = run.model.empty() ? "" : "  model " + terminal_safe(run.model);
  std::string out = printf_string(
      "run %s%s  rank %d of %d%s  device %s  keel %s  torch %s  seq %" PRIu64 "  (%zu layers)",
      terminal_safe(run.run_id).c_str(), model.c_str(), run.rank, run.world_size, run.sharded ? ", sharded" : "",
      terminal_safe(run.device).c_str(), terminal_safe(run.keel_version).c_str(),
      terminal_safe(run.torch_version).c_str(), run.seq, run.layers.size());
  int name_width = 5;
  int shape_width = 5;
  for (const wire::LayerInfo& layer : run.layers) {
    name_width = std::max(name_width, static_cast<int>(layer.name.size()));
    shape_width = std::max(shape_width, static_cast<int>(shape_text(layer.shape).size()));
  }
  // A pathological name must not push every other column off the screen.
  name_width = std::min(name_width, 64);
  out += printf_string("\n  %5s  %-*s  %-*s  %12s  %s", "#", name_width, "layer", shape_width,
                       "shape", "numel", "dtype");
  for (size_t i = 0; i < run.layers.size(); ++i) {
    const wire::LayerInfo& layer = run.layers[i];
    out += printf_string("\n  %5zu  %-*s  %-*s  %12" PRId64 "  %s", i, name_width,
                         terminal_safe(layer.name).c_str(), shape_width,
                         shape_text(layer.shape).c_str(), layer.numel,
                         terminal_safe(layer.dtype).c_str());
  }
  std::string watches;
  for (const std::string& watch : run.watches) {
    watches += (watches.empty() ? "" : ", ") + terminal_safe(watch);
  }
  out += "\n  watches: " + (watches.empty() ? std::string("(none)") : watches);
  return out;
}

std::string step_table_header() {
  return printf_string(kStepRowFormat, "step", "rank", "loss", "grad_norm", "update",
                       "probe_us", "dropped", "worst layer (grad_norm)");
}

std::optional<WorstLayer> worst_layer(const wire::StepRecord& step) {
  if (step.layer_count == 0 || step.metric_block(wire::LayerMetric::kGradNorm) < 0) return {};
  std::optional<WorstLayer> worst;
  for (uint32_t i = 0; i < step.layer_count; ++i) {
    const float norm = step.layer_value(wire::LayerMetric::kGradNorm, i);
    if (!std::isfinite(norm)) return WorstLayer{i, norm};
    if (!worst || norm > worst->grad_norm) worst = WorstLayer{i, norm};
  }
  return worst;
}

std::optional<WorstLayer> worst_module(const wire::StepRecord& step) {
  const int block = step.module_block(wire::LayerMetric::kGradNorm);
  if (block < 0) return {};
  const size_t begin = size_t(block) * step.module_count;
  std::optional<WorstLayer> worst;
  for (uint32_t k = 0; k < step.module_count && begin + k < step.module_values.size(); ++k) {
    const float norm = step.module_values[begin + k];
    if (!std::isfinite(norm)) return WorstLayer{k, norm};
    if (!worst || norm > worst->grad_norm) worst = WorstLayer{k, norm};
  }
  return worst;
}

std::string format_step(const wire::StepRecord& step, const LayerNames& names) {
  std::string update = "applied";
  if (step.skipped) {
    update = step.skip_reason.empty() ? "SKIPPED" : "SKIPPED " + terminal_safe(step.skip_reason);
  }
  std::string worst_text = "-";
  if (const std::optional<WorstLayer> worst = worst_layer(step)) {
    worst_text = terminal_safe(names.name(step, worst->index)) + " (" +
                 format_value(worst->grad_norm, 4) + ")";
  } else if (const std::optional<WorstLayer> module = worst_module(step)) {
    worst_text = "module " + terminal_safe(names.module_name(step, module->index)) + " (" +
                 format_value(module->grad_norm, 4) + ")";
  }
  const std::string probe_us =
      std::isfinite(step.probe_us) ? printf_string("%.0f", step.probe_us)
                                   : format_value(step.probe_us, 4);
  return printf_string(kStepRowFormat, std::to_string(step.step).c_str(),
                       std::to_string(step.rank).c_str(), format_value(step.loss, 6).c_str(),
                       format_value(step.grad_norm, 4).c_str(), update.c_str(),
                       probe_us.c_str(), std::to_string(step.dropped).c_str(),
                       worst_text.c_str());
}

std::string warning_line(const wire::Event& event) {
  if (!event.warning) return "";
  std::string out = warning_numbers_text(*event.warning);
  const std::string& advice = event.warning->advice;
  if (!advice.empty() && event.detail.find(advice) == std::string::npos) out += "; " + advice;
  return out;
}

std::string format_event(const wire::Event& event) {
  std::string out = printf_string("event %-22s step %" PRId64 "  rank %d",
                                  terminal_safe(event.kind).c_str(), event.step, event.rank);
  if (!event.layer.empty()) out += "  layer " + terminal_safe(event.layer);
  if (!event.detail.empty()) out += "  " + terminal_safe(event.detail);
  // The cause on a line of its own: the one sentence a person reads first.
  if (event.cause) out += "\n      cause " + terminal_safe(event.cause->kind) + ": " + terminal_safe(event.cause->sentence);
  // A warning's numbers on a line of their own, as a cause is; its advice when the detail left it out.
  if (event.warning) out += "\n      warning " + terminal_safe(warning_line(event));
  return out;
}

std::string format_command(const wire::Command& command) {
  std::string out = printf_string("cmd   %-22s id %" PRIu64 "  rank %d  count %" PRId64,
                                  terminal_safe(command.kind).c_str(), command.id,
                                  command.rank, command.count);
  if (!command.label.empty()) out += "  label " + terminal_safe(command.label);
  if (!command.policy.empty()) {
    out += "  policy " + terminal_safe(command.policy) + (command.enable ? " on" : " off");
  }
  if (command.kind == wire::command_kind::kRewind) {
    out += command.to_step < 0 ? std::string("  to the newest snapshot") : "  to_step " + std::to_string(command.to_step);
  }
  if (command.at_step >= 0) out += "  at_step " + std::to_string(command.at_step);
  return out;
}

std::string format_ack(const wire::Ack& ack) {
  const std::string verdict = ack.ok ? "ok" : "refused";
  std::string out = printf_string("ack   %-22s id %" PRIu64 "  rank %d  step %" PRId64,
                                  verdict.c_str(), ack.id, ack.rank, ack.step);
  // The updates a skip covers, the steps a history answer sent.
  if (ack.count > 0) out += "  count " + std::to_string(ack.count);
  if (!ack.path.empty()) {
    out += "  path " + terminal_safe(ack.path) + "  bytes " + std::to_string(ack.bytes);
  }
  if (!ack.error.empty()) out += "  error: " + terminal_safe(ack.error);
  return out;
}

std::string TablePrinter::format(const wire::Message& message, const LayerNames& names) {
  std::string out;
  if (const auto* run = std::get_if<wire::RunDescription>(&message)) {
    wire::RunDescription unnumbered = *run;
    unnumbered.seq = 0;
    std::string text = format_run(unnumbered);
    auto [printed, fresh] =
        printed_runs_.try_emplace(wire::run_key_of(*run), text);
    if (!fresh && printed->second == text) return "";
    printed->second = std::move(text);
    header_due_ = true;
    out = format_run(*run);
  } else if (const auto* step = std::get_if<wire::StepRecord>(&message)) {
    if (header_due_ || (lines_per_header_ > 0 && lines_since_header_ >= lines_per_header_)) {
      out = step_table_header() + "\n";
      lines_since_header_ = 0;
    }
    header_due_ = false;
    out += format_step(*step, names);
  } else if (const auto* event = std::get_if<wire::Event>(&message)) {
    out = format_event(*event);
  } else if (const auto* command = std::get_if<wire::Command>(&message)) {
    out = format_command(*command);
  } else if (const auto* ack = std::get_if<wire::Ack>(&message)) {
    out = format_ack(*ack);
  }
  out += "\n";
  lines_since_header_ += std::count(out.begin(), out.end(), '\n');
  return out;
}

}  // namespace keel::app
