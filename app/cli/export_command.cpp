#include "cli/export_command.hpp"

#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <regex>
#include <unordered_map>

#include "text/layer_names.hpp"
#include "text/table_format.hpp"
#include "keel/wire/layer_metrics.hpp"
#include "keel/wire/messages.hpp"
#include "net/recording_file.hpp"

namespace keel::app {

namespace {

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

void row(std::ostream& out, int64_t step, const std::string& layer, const char* metric, double value) {
  out << step << ',' << layer << ',' << metric << ',' << format_value(value, 9) << '\n';
}

void write_event(std::ostream& out, const wire::Event& e) {
  out << e.step << ',' << e.rank << ',' << csv_field(e.kind) << ',' << csv_field(e.layer) << ','
      << csv_field(e.detail);
  if (e.cause) {
    out << ',' << csv_field(e.cause->kind) << ',' << csv_field(e.cause->op) << ',' << csv_field(e.cause->module) << ','
        << csv_field(e.cause->sentence);
  } else {
    out << ",,,,";
  }
  out << '\n';
}

}  // namespace

int run_export(const ExportOptions& options, std::ostream& out, std::ostream& err) {
  std::regex pattern;
  try {
    if (!options.layers.empty()) pattern = std::regex(options.layers, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    err << "keel-cli: --layers " << options.layers << " is not a regular expression: " << e.what() << '\n';
    return 1;
  }
  LayerNames names;
  // Whether a layer name matches, remembered: a run names the same few hundred layers at
  // every step.
  std::unordered_map<std::string, bool> matches;
  const auto wanted = [&](const std::string& layer) {
    if (options.layers.empty()) return true;
    auto it = matches.find(layer);
    if (it == matches.end()) it = matches.emplace(layer, std::regex_search(layer, pattern)).first;
    return it->second;
  };

  if (options.events) {
    out << "step,rank,kind,layer,detail,cause_kind,cause_op,cause_module,cause\n";
  } else {
    out << "step,layer,metric,value\n";
  }
  const auto take = [&](wire::Message& message) {
    if (const auto* description = std::get_if<wire::RunDescription>(&message)) {
      names.learn(*description);
      return;
    }
    if (options.events) {
      if (const auto* event = std::get_if<wire::Event>(&message)) write_event(out, *event);
      return;
    }
    const auto* step = std::get_if<wire::StepRecord>(&message);
    if (!step) return;
    if (options.layers.empty()) {
      row(out, step->step, "", "loss", step->loss);
      row(out, step->step, "", "lr", step->lr);
      row(out, step->step, "", "grad_norm", step->grad_norm);
      row(out, step->step, "", "probe_us", step->probe_us);
      if (step->scaler) row(out, step->step, "", "loss_scale", step->scaler->scale);
    }
    for (uint32_t layer = 0; layer < step->layer_count; ++layer) {
      const std::string name = names.name(*step, layer);
      if (!wanted(name)) continue;
      const std::string field = csv_field(name);
      for (int m = 0; m < wire::kLayerMetricCount; ++m) {
        const auto metric = static_cast<wire::LayerMetric>(m);
        if (step->metric_block(metric) < 0) continue;
        row(out, step->step, field, wire::layer_metric_name(metric), step->layer_value(metric, layer));
      }
    }
    // A rollup step's modules, under their names: "module.<metric>", the worst layer's value.
    for (uint32_t k = 0; k < step->module_count; ++k) {
      const std::string name = names.module_name(*step, k);
      if (!wanted(name)) continue;
      const std::string field = csv_field(name);
      for (int m = 0; m < wire::kLayerMetricCount; ++m) {
        const auto metric = static_cast<wire::LayerMetric>(m);
        const int block = step->module_block(metric);
        const size_t at = size_t(block) * step->module_count + k;
        if (block < 0 || at >= step->module_values.size()) continue;
        row(out, step->step, field, (std::string("module.") + wire::layer_metric_name(metric)).c_str(),
            step->module_values[at]);
      }
    }
  };
  RecordingFileReport report;
  std::string error;
  if (!read_recording_file(options.path, take, report, error)) {
    err << "keel-cli: " << error << '\n';
    return 1;
  }
  for (const std::string& problem : report.problems) err << "keel-cli: warning: " << problem << '\n';
  out.flush();
  return 0;
}

CliCommand add_export_command(CLI::App& app) {
  auto options = std::make_shared<ExportOptions>();
  CLI::App* command = app.add_subcommand(
      "export", "A recorded run as tidy CSV on stdout (step,layer,metric,value), or its events (--events)");
  command->add_option("FILE", options->path, "The recording (keel-runs/*.keelrec) or a dump's telemetry.msgpack")
      ->required()
      ->type_name("FILE");
  command->add_option("--layers", options->layers,
                      "Only the layers whose name this regular expression matches (and no run series)")
      ->type_name("REGEX");
  command->add_flag("--events", options->events,
                    "Write the events instead: step,rank,kind,layer,detail,cause_kind,cause_op,cause_module,cause");
  return CliCommand{command, [options] { return run_export(*options, std::cout, std::cerr); }};
}

}  // namespace keel::app
