#include "cli/summary_command.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "text/layer_names.hpp"
#include "text/table_format.hpp"
#include "keel/wire/messages.hpp"
#include "keel/wire/vocabulary.hpp"
#include "net/recording_file.hpp"

namespace keel::app {

namespace {

std::string number(double value) { return format_value(value, 4); }

std::string utc(int64_t unix_ms) {
  const std::time_t seconds = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return text;
}

std::string duration(double seconds) {
  const int64_t s = static_cast<int64_t>(std::llround(seconds));
  char text[32];
  if (s >= 3600) {
    std::snprintf(text, sizeof text, "%lldh%02lldm", static_cast<long long>(s / 3600),
                  static_cast<long long>(s % 3600 / 60));
  } else {
    std::snprintf(text, sizeof text, "%lldm%02llds", static_cast<long long>(s / 60), static_cast<long long>(s % 60));
  }
  return text;
}

std::string counts(const std::map<std::string, uint64_t>& by_kind) {
  std::string out;
  for (const auto& [kind, n] : by_kind) out += (out.empty() ? "" : ", ") + terminal_safe(kind) + " " + std::to_string(n);
  return out;
}

struct Loudest {
  double grad_norm = -1;
  int64_t step = 0;
};

// Rewinds, rewind_stopped and warning events listed one a line, so many of each; the rest are
// counted.
constexpr uint64_t kRewindsListed = 8;
constexpr uint64_t kWarningsListed = 8;

// Everything the ten lines need, gathered in one pass over the file.
struct RunSummary {
  std::optional<wire::RunDescription> run;
  LayerNames names;
  uint64_t steps = 0;
  int64_t first_step = 0, last_step = 0;
  int64_t first_stamp_ns = 0, last_stamp_ns = 0;
  std::map<std::string, uint64_t> skips;
  std::optional<double> first_loss, last_loss;
  double min_loss = INFINITY;
  int64_t min_loss_step = 0;
  std::map<std::string, uint64_t> events;
  std::optional<wire::Event> first_nonfinite;
  std::vector<std::string> rewinds;   // "step N: rewound from ... (why)", the first kRewindsListed
  uint64_t rewind_events = 0;
  std::vector<std::string> warnings;   // "step N: LAYER: numbers", the first kWarningsListed
  uint64_t warning_events = 0;
  std::map<std::string, Loudest> loudest;   // by layer name
  uint64_t record_dropped = 0;

  void take(wire::Message& message) {
    if (auto* description = std::get_if<wire::RunDescription>(&message)) {
      names.learn(*description);
      run = std::move(*description);
    } else if (const auto* step = std::get_if<wire::StepRecord>(&message)) {
      take_step(*step);
    } else if (auto* event = std::get_if<wire::Event>(&message)) {
      ++events[event->kind];
      if (event->kind == wire::event_kind::kRewind || event->kind == wire::event_kind::kRewindStopped) take_rewind(*event);
      if (event->kind == wire::event_kind::kWarning) take_warning(*event);
      if (event->kind == "first_nonfinite" && !first_nonfinite) first_nonfinite = std::move(*event);
    }
  }

  // A rewind's detail reads "rewound from step N to step S (why): what was put back ...", a
  // stop's "diverged ... : not rewound; what usually cures ...": the line keeps from, to and why.
  void take_rewind(const wire::Event& event) {
    if (++rewind_events > kRewindsListed) return;
    std::string said = event.detail;
    const size_t put_back = said.find("): ");
    if (event.kind == wire::event_kind::kRewind && put_back != std::string::npos) said.resize(put_back + 1);
    const size_t cures = said.find("; what usually cures");
    if (cures != std::string::npos) said.resize(cures);
    const std::string what = event.kind == wire::event_kind::kRewind ? "" : "not rewound, ";
    rewinds.push_back("step " + std::to_string(event.step) + ": " + what + terminal_safe(said));
  }

  // The forecaster's numbers (warning_line), where its sentence would be a paragraph per line.
  void take_warning(const wire::Event& event) {
    if (++warning_events > kWarningsListed) return;
    const std::string where = event.layer.empty() ? "" : terminal_safe(event.layer) + ": ";
    const std::string numbers = event.warning ? warning_line(event) : event.detail;
    warnings.push_back("step " + std::to_string(event.step) + ": " + where + terminal_safe(numbers));
  }

  void take_step(const wire::StepRecord& step) {
    if (steps == 0) {
      first_step = step.step;
      first_stamp_ns = step.stamp_unix_ns;
    }
    ++steps;
    last_step = step.step;
    last_stamp_ns = step.stamp_unix_ns;
    if (step.skipped) ++skips[step.skip_reason.empty() ? "unknown" : step.skip_reason];
    if (std::isfinite(step.loss)) {
      if (!first_loss) first_loss = step.loss;
      last_loss = step.loss;
      if (step.loss < min_loss) {
        min_loss = step.loss;
        min_loss_step = step.step;
      }
    }
    record_dropped = std::max(record_dropped, step.record_dropped);
    if (step.metric_block(wire::LayerMetric::kGradNorm) < 0) return;
    for (uint32_t layer = 0; layer < step.layer_count; ++layer) {
      const float value = step.layer_value(wire::LayerMetric::kGradNorm, layer);
      if (!std::isfinite(value)) continue;
      Loudest& loud = loudest[names.name(step, layer)];
      if (value > loud.grad_norm) loud = Loudest{value, step.step};
    }
  }
};

}  // namespace

int run_summary(const std::string& path, std::ostream& out, std::ostream& err) {
  RunSummary s;
  RecordingFileReport report;
  std::string error;
  if (!read_recording_file(path, [&](wire::Message& m) { s.take(m); }, report, error)) {
    err << "keel-cli: " << error << '\n';
    return 1;
  }
  for (const std::string& problem : report.problems) err << "keel-cli: warning: " << terminal_safe(problem) << '\n';

  if (s.run) {
    const wire::RunDescription& r = *s.run;
    out << "run      " << terminal_safe(r.run_id) << (r.model.empty() ? "" : " (model " + terminal_safe(r.model) + ")")
        << ", rank " << r.rank << " of " << r.world_size << ", " << r.layers.size() << " layers on "
        << terminal_safe(r.device) << ", torch " << terminal_safe(r.torch_version) << ", keel "
        << terminal_safe(r.keel_version) << '\n';
  } else {
    out << "run      (no run description in the file)\n";
  }
  out << "file     " << terminal_safe(path) << " (" << report.kind << ", " << report.file_bytes << " bytes, " << report.messages
      << " messages" << (report.undecodable ? ", " + std::to_string(report.undecodable) + " undecodable" : "")
      << ")\n";
  if (s.steps == 0) {
    out << "steps    none recorded\n";
  } else {
    out << "steps    " << s.first_step << " to " << s.last_step << ": " << s.steps << " recorded";
    const int64_t span = s.last_step - s.first_step + 1;
    if (static_cast<uint64_t>(span) > s.steps) out << " (" << span - static_cast<int64_t>(s.steps) << " thinned or lost)";
    if (s.record_dropped > 0) out << ", " << s.record_dropped << " messages the recorder could not write";
    out << '\n';
    out << "time     " << (s.run && s.run->start_unix_ms > 0 ? "started " + utc(s.run->start_unix_ms) + ", " : "")
        << "recorded steps span " << duration(static_cast<double>(s.last_stamp_ns - s.first_stamp_ns) * 1e-9) << '\n';
  }
  uint64_t skipped = 0;
  for (const auto& [reason, n] : s.skips) skipped += n;
  out << "skips    " << skipped << (skipped ? " (" + counts(s.skips) + ")" : "") << '\n';
  if (s.first_nonfinite) {
    const wire::Event& e = *s.first_nonfinite;
    out << "first non-finite  step " << e.step << (e.layer.empty() ? "" : " in " + terminal_safe(e.layer)) << ": "
        << terminal_safe(e.detail) << '\n';
    out << "cause    "
        << terminal_safe(e.cause ? (e.cause->sentence.empty() ? e.cause->kind : e.cause->sentence) : "not classified")
        << '\n';
  } else {
    out << "first non-finite  none recorded\n";
    out << "cause    -\n";
  }
  if (s.first_loss) {
    out << "loss     first " << number(*s.first_loss) << ", last " << number(*s.last_loss) << ", least "
        << number(s.min_loss) << " at step " << s.min_loss_step << '\n';
  }
  std::vector<std::pair<std::string, Loudest>> loud(s.loudest.begin(), s.loudest.end());
  std::sort(loud.begin(), loud.end(), [](const auto& a, const auto& b) { return a.second.grad_norm > b.second.grad_norm; });
  out << "loudest  ";
  if (loud.empty()) out << "(no grad norms recorded)";
  for (size_t i = 0; i < std::min<size_t>(3, loud.size()); ++i) {
    out << (i ? ", " : "") << terminal_safe(loud[i].first) << " " << number(loud[i].second.grad_norm) << " (step "
        << loud[i].second.step << ")";
  }
  out << '\n';
  out << "events   " << (s.events.empty() ? "none" : counts(s.events)) << '\n';
  for (const std::string& rewind : s.rewinds) out << "rewind   " << rewind << '\n';
  if (s.rewind_events > kRewindsListed) out << "rewind   and " << s.rewind_events - kRewindsListed << " more\n";
  for (const std::string& warning : s.warnings) out << "warning  " << warning << '\n';
  if (s.warning_events > kWarningsListed) out << "warning  and " << s.warning_events - kWarningsListed << " more\n";
  return 0;
}

CliCommand add_summary_command(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  CLI::App* summary = app.add_subcommand("summary", "A recorded run in ten lines (a recording or a dump's telemetry.msgpack)");
  summary->add_option("FILE", *path, "The recording (keel-runs/*.keelrec) or a dump's telemetry.msgpack")
      ->required()
      ->type_name("FILE");
  return CliCommand{summary, [path] { return run_summary(*path, std::cout, std::cerr); }};
}

}  // namespace keel::app
