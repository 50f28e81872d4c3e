// keel-bench-app's wide mode; see app_bench_wide.hpp.

#include "app_bench_wide.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <variant>

#include "app_bench_data.hpp"
#include "app_bench_frame.hpp"
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

}  // namespace

int run_wide_bench(const WideOptions& options) {
  const app::ModelConfig config;
  std::printf("keel-bench-app: wide mode, %d layers x %d metrics, %lld steps stored, %d measured frames per scene\n",
              options.layers, wire::kLayerMetricCount, static_cast<long long>(options.steps), options.frames);
  std::fflush(stdout);

  HeadlessUi ui(1600, 1000);
  SyntheticRun run(options.layers, 1);
  const long rss_before_kb = status_kb("VmRSS");
  app::Model model(config);
  model.ingest(run.description());
  wire::Message message = wire::StepRecord{};
  wire::StepRecord& record = std::get<wire::StepRecord>(message);
  Clock::duration inside{};
  int64_t step = 0;
  for (; step < options.steps; ++step) {
    run.fill(step, record);
    const Clock::time_point start = Clock::now();
    model.ingest(message);
    inside += Clock::now() - start;
  }
  const double ingest_secs = std::chrono::duration<double>(inside).count();
  const size_t bytes_used = model.bytes_used();
  const long rss_after_kb = status_kb("VmRSS");
  const app::RunModel* shown = app::ui::Dashboard::shown_run(model);
  const double layer_steps = double(options.layers) * double(options.steps);

  const FrameTiming dashboard = time_dashboard_frame(ui, model, options.frames);
  // Following live: a step arrives before each frame (its ingest untimed), so every cache a view
  // keeps is stale and the frame does the work a new step costs.
  const FrameTiming live = time_dashboard_frame(ui, model, options.frames, [&] {
    run.fill(step++, record);
    model.ingest(message);
  });
  if (dashboard.frames == 0 || live.frames == 0) {
    std::fprintf(stderr, "keel-bench-app: the view could not be made to show the whole history\n");
    return 1;
  }

  const bool fits = bytes_used <= config.memory_budget;
  std::printf("\n%-60s %12.2f\n", "ingest, ms per record", ratio(ingest_secs * 1e3, double(options.steps)));
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
      "\"memory_budget\":%zu,\"layer_recent_steps\":%lld,\"fits_budget\":%s}\n",
      options.layers, wire::kLayerMetricCount, static_cast<long long>(options.steps),
      ratio(ingest_secs * 1e3, double(options.steps)), dashboard.cpu_ms_median, dashboard.cpu_ms_p90,
      live.cpu_ms_median, bytes_used, static_cast<long long>(rss_after_kb) * 1024,
      static_cast<long long>(rss_after_kb - rss_before_kb) * 1024, ratio(double(bytes_used), layer_steps),
      config.memory_budget, static_cast<long long>(shown->layer_recent_steps()), fits ? "true" : "false");
  return 0;
}

}  // namespace keel::bench
