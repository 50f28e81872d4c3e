// keel-bench-app's wide mode; see app_bench_wide.hpp.

#include "app_bench_wide.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <cmath>
#include <limits>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "app_bench_data.hpp"
#include "app_bench_frame.hpp"
#include "median.hpp"
#include "model/model.hpp"
#include "ui/dashboard.hpp"

namespace keel::bench {
namespace {

using Clock = std::chrono::steady_clock;

// kB of a /proc/self/status field (VmRSS).
long status_kb(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const size_t n = std::strlen(field);
  while (std::getline(in, line)) {
    if (line.compare(0, n, field) == 0 && line.size() > n && line[n] == ':') return std::atol(line.c_str() + n + 1);
  }
  return -1;
}

double ratio(double a, double b) { return b > 0 ? a / b : 0; }

// The module of a layer name at `depth` components (its name less the last component, cut
// there), as the probe's module_ranges.cpp plans them.
std::string_view module_prefix(std::string_view name, size_t depth) {
  const size_t module_end = name.rfind('.');
  if (module_end == std::string_view::npos) return {};
  const std::string_view module = name.substr(0, module_end);
  size_t end = 0;
  for (size_t d = 0; d < depth; ++d) {
    end = module.find('.', d == 0 ? 0 : end + 1);
    if (end == std::string_view::npos) return module;
  }
  return module.substr(0, end);
}

// The deepest depth's ranges with at most `most` modules (the probe's 1,024).
std::vector<wire::ModuleRange> plan_modules(const wire::RunDescription& description, size_t most) {
  std::vector<wire::ModuleRange> chosen;
  for (size_t depth = 1; depth < 16; ++depth) {
    std::vector<wire::ModuleRange> ranges;
    for (size_t i = 0; i < description.layers.size(); ++i) {
      const std::string_view prefix = module_prefix(description.layers[i].name, depth);
      if (!ranges.empty() && ranges.back().name == prefix) {
        ++ranges.back().count;
      } else {
        ranges.push_back({std::string(prefix), uint32_t(i), 1});
      }
    }
    if (ranges.size() > most || ranges.size() == chosen.size()) break;
    chosen = std::move(ranges);
  }
  return chosen;
}

// Turns a per-layer record into the rollup the probe would send instead: per module and
// metric its worst layer (the max, NaN when any is NaN; a count summed: wire::ModuleRollup).
void to_rollup(const std::vector<wire::ModuleRange>& modules, wire::StepRecord& record) {
  const size_t layers = record.layer_count, count = modules.size();
  record.module_mask = record.metric_mask;
  record.module_count = uint32_t(count);
  record.module_values.assign(size_t(__builtin_popcount(record.module_mask)) * count, 0.0f);
  for (int m = 0; m < wire::kLayerMetricCount; ++m) {
    const auto metric = static_cast<wire::LayerMetric>(m);
    const int block = record.metric_block(metric);
    if (block < 0) continue;
    const bool sum = wire::info_of(metric).modules == wire::ModuleRollup::kSum;
    const float* values = record.layer_values.data() + size_t(block) * layers;
    for (size_t k = 0; k < count; ++k) {
      float worst = sum ? 0.0f : -std::numeric_limits<float>::infinity();
      for (uint32_t i = modules[k].first; i < modules[k].first + modules[k].count; ++i) {
        if (std::isnan(values[i]) || std::isnan(worst)) {
          worst = std::numeric_limits<float>::quiet_NaN();
        } else {
          worst = sum ? worst + values[i] : std::max(worst, values[i]);
        }
      }
      record.module_values[size_t(block) * count + k] = worst;
    }
  }
  record.metric_mask = 0;
  record.layer_values.clear();
}

}  // namespace

int run_wide_bench(const WideOptions& options) {
  const app::ModelConfig config;
  std::printf("keel-bench-app: wide mode, %d layers x %d metrics, %lld steps stored, %d measured frames per scene%s\n",
              options.layers, wire::kLayerMetricCount, static_cast<long long>(options.steps), options.frames,
              options.layer_detail_every > 0
                  ? (", per-layer values every " + std::to_string(options.layer_detail_every) + " steps, module rollups between").c_str()
                  : "");
  std::fflush(stdout);

  HeadlessUi ui(1600, 1000);
  SyntheticRun run(options.layers, 1);
  const long rss_before_kb = status_kb("VmRSS");
  app::Model model(config);
  wire::RunDescription description = run.description();
  const int every = options.layer_detail_every;
  if (every > 0) description.modules = plan_modules(description, 1024);
  model.ingest(description);
  wire::Message message = wire::StepRecord{};
  wire::StepRecord& record = std::get<wire::StepRecord>(message);
  // A step's record as the probe would send it: per layer, or (untimed) its modules' rollup.
  const auto fill = [&](int64_t at) {
    run.fill(at, record);
    record.module_mask = 0;
    record.module_count = 0;
    record.module_values.clear();
    if (every > 0 && at % every != 0) to_rollup(description.modules, record);
  };
  Clock::duration inside{};
  std::vector<double> layer_ms, rollup_ms;   // each record's ingest, by kind
  int64_t step = 0;
  for (; step < options.steps; ++step) {
    fill(step);
    const bool rollup = record.metric_mask == 0;
    const Clock::time_point start = Clock::now();
    model.ingest(message);
    const Clock::duration took = Clock::now() - start;
    inside += took;
    (rollup ? rollup_ms : layer_ms).push_back(std::chrono::duration<double, std::milli>(took).count());
  }
  const double ingest_secs = std::chrono::duration<double>(inside).count();
  // The first record also makes every series: the median is the steady cost of each kind.
  const double layer_median_ms = median(layer_ms), rollup_median_ms = median(rollup_ms);
  const size_t bytes_used = model.bytes_used();
  const long rss_after_kb = status_kb("VmRSS");
  const app::RunModel* shown = app::ui::Dashboard::shown_run(model);
  const double layer_steps = double(options.layers) * double(options.steps);

  const FrameTiming dashboard = time_dashboard_frame(ui, model, options.frames);
  // Following live: a step arrives before each frame (its ingest untimed), so every cache a view
  // keeps is stale and the frame does the work a new step costs.
  const FrameTiming live = time_dashboard_frame(ui, model, options.frames, [&] {
    fill(step++);
    model.ingest(message);
  });
  if (dashboard.frames == 0 || live.frames == 0) {
    std::fprintf(stderr, "keel-bench-app: the view could not be made to show the whole history\n");
    return 1;
  }

  const bool fits = bytes_used <= config.memory_budget;
  std::printf("\n%-60s %12.2f\n", "ingest, ms per record", ratio(ingest_secs * 1e3, double(options.steps)));
  if (every > 0) {
    std::printf("%-60s %12zu\n", "  modules described (rollups between per-layer records)", description.modules.size());
    std::printf("%-60s %12.2f\n", "  per-layer record (every N steps), ms (median)", layer_median_ms);
    std::printf("%-60s %12.2f\n", "  module rollup record, ms (median)", rollup_median_ms);
  }
  std::printf("%-60s %12.2f\n", "frame: whole dashboard, CPU ms (median)", dashboard.cpu_ms_median);
  std::printf("%-60s %12.2f\n", "  p90", dashboard.cpu_ms_p90);
  std::printf("%-60s %12lld\n", "  vertices", static_cast<long long>(dashboard.vertices));
  std::printf("%-60s %12.2f\n", "frame with a new step each frame, CPU ms (median)", live.cpu_ms_median);
  std::printf("%-60s %12.2f\n", "  p90", live.cpu_ms_p90);
  std::printf("%-60s %12.1f\n", "Model::bytes_used after the run, MB", double(bytes_used) / 1e6);
  std::printf("%-60s %12.1f\n", "RSS after the run, MB", double(rss_after_kb) * 1024 / 1e6);
  std::printf("%-60s %12.1f\n", "  of which grown while storing it, MB", double(rss_after_kb - rss_before_kb) * 1024 / 1e6);
  std::printf("%-60s %12.1f\n", "bytes per layer-step (Model::bytes_used)", ratio(double(bytes_used), layer_steps));
  std::printf("%-60s %12.1f\n", "bytes per layer-step (RSS grown)",
              ratio(double(rss_after_kb - rss_before_kb) * 1024, layer_steps));
  std::printf("%-60s %12.1f\n", "memory budget (--memory-budget), MB", double(config.memory_budget) / 1e6);
  std::printf("%-60s %12.1f\n", "  one run's share for its layer series, MB", double(config.budget_share()) / 1e6);
  std::printf("%-60s %12lld\n", "  full-resolution steps a layer series keeps",
              static_cast<long long>(shown->layer_recent_steps()));
  std::printf("%-60s %12s\n", "  model inside the budget", fits ? "yes" : "no");
  std::printf(
      "{\"mode\":\"wide\",\"layers\":%d,\"metrics\":%d,\"steps\":%lld,\"ingest_ms_per_record\":%.3f,"
      "\"dashboard_frame_ms\":%.3f,\"dashboard_frame_ms_p90\":%.3f,\"dashboard_frame_ms_new_step\":%.3f,"
      "\"model_bytes\":%zu,\"rss_bytes\":%lld,\"rss_grown_bytes\":%lld,\"bytes_per_layer_step\":%.2f,"
      "\"memory_budget\":%zu,\"layer_recent_steps\":%lld,\"fits_budget\":%s,\"layer_detail_every\":%d,"
      "\"modules\":%zu,\"ingest_ms_layer_record_median\":%.3f,\"ingest_ms_rollup_record_median\":%.3f}\n",
      options.layers, wire::kLayerMetricCount, static_cast<long long>(options.steps),
      ratio(ingest_secs * 1e3, double(options.steps)), dashboard.cpu_ms_median, dashboard.cpu_ms_p90,
      live.cpu_ms_median, bytes_used, static_cast<long long>(rss_after_kb) * 1024,
      static_cast<long long>(rss_after_kb - rss_before_kb) * 1024, ratio(double(bytes_used), layer_steps),
      config.memory_budget, static_cast<long long>(shown->layer_recent_steps()), fits ? "true" : "false", every,
      description.modules.size(), layer_median_ms, rollup_median_ms);
  return 0;
}

}  // namespace keel::bench
