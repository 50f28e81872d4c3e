// keel-bench-app: what the dashboard costs, on synthetic telemetry and without a window.
//
// Measures, on one model of 1,000 layers x 6 metrics fed through Model::ingest() (no network):
//   - ingest rate in layer-samples per second (time inside ingest() only);
//   - the UI thread's CPU time to build one frame (NewFrame to Render, no GL) showing the
//     heatmap and three plots over the whole history, at 10k, 100k and 1M steps, and the same
//     for the app's whole dashboard, and the whole dashboard watching 8 ranks (10k steps each);
//   - history memory per layer-metric sample of the full-resolution window, and its bound;
// then, through a real ZeroMQ socket and the app's Receiver, step-to-pixel latency at 10
// steps/s. The history grows in place from 10k to 1M steps, so every size is the same run.
// Full mode stores every step. --quick stores every step to 10k, then every 10th step to 100k
// and every 100th to 1M: the archive's buckets span the same steps (a gap is a missing sample,
// not a missing bucket), so queries over the whole history touch the same buckets, but the
// recent window is mostly gaps there; the output says which was run.
// Wide mode (--steps N, and by default past 10,000 layers, with N = 1,000): a short run of a
// mixture-of-experts-sized model instead, measured at its end (app_bench_wide.hpp); with
// --layer-detail-every N fed as the probe feeds it: per-layer records every N steps, module
// rollups between.
// The last line is one JSON object.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <string>
#include <variant>
#include <vector>

#include "app_bench_data.hpp"
#include "app_bench_frame.hpp"
#include "app_bench_latency.hpp"
#include "app_bench_sharded.hpp"
#include "app_bench_wide.hpp"
#include "model/history_store.hpp"
#include "ui/dashboard.hpp"

namespace {

using Clock = std::chrono::steady_clock;
namespace bench = keel::bench;
namespace wire = keel::wire;

// A history size the frames and memory are measured at, and how densely steps up to it are
// stored (1: every step).
struct Checkpoint {
  int64_t steps;
  int64_t stride;
  const char* label;
};

struct Measured {
  Checkpoint checkpoint;
  int64_t records = 0;         // records ingested since the previous checkpoint
  double ingest_secs = 0;      // time inside Model::ingest() for them
  double samples_per_s = 0;    // layer-samples per second over them
  size_t bytes_used = 0;       // Model::bytes_used() at the checkpoint
  double bytes_per_sample = 0; // per layer-metric step of the full-resolution window
  bench::FrameTiming views;
  bench::FrameTiming dashboard;
};

double ratio(double a, double b) { return b > 0 ? a / b : 0; }

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{"keel-bench-app: the dashboard's ingest rate, frame build time, history memory "
               "and step-to-pixel latency"};
  bool quick = false;
  int layers = 1000;
  int frames = 0;
  double latency_secs = 0;
  double steps_per_s = 10;
  int64_t wide_steps = 0;
  int layer_detail_every = 0;
  int sharded_ranks = 0;
  cli.add_flag("--quick", quick, "short run: sparse history past 10k steps, fewer frames, 10 s latency");
  cli.add_option("--layers", layers, "layers in the synthetic model")->capture_default_str()->check(CLI::Range(1, 100000));
  cli.add_option("--frames", frames, "measured frames per scene (default 20 quick, 60 full)")->check(CLI::NonNegativeNumber);
  cli.add_option("--latency-secs", latency_secs, "publishing time of the latency test (default 10 quick, 60 full)")
      ->check(CLI::NonNegativeNumber);
  cli.add_option("--steps-per-s", steps_per_s, "step rate of the latency test")->capture_default_str()->check(CLI::PositiveNumber);
  cli.add_option("--steps", wide_steps,
                 "wide mode: store this many steps and measure there only (default past 10,000 layers: 1000)")
      ->check(CLI::PositiveNumber);
  cli.add_option("--layer-detail-every", layer_detail_every,
                 "wide mode: per-layer records every N steps and module rollups between, as the probe sends "
                 "a model past 4,096 tensors (0: every record per layer)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cli.add_option("--sharded-ranks", sharded_ranks,
                 "the sharded-job scene alone: this many ranks of a job sharding every layer (FSDP), the job's row "
                 "combined from them (--steps per-layer steps from each, default 48)")
      ->check(CLI::Range(2, 64));
  CLI11_PARSE(cli, argc, argv);
  if (sharded_ranks > 0) {
    bench::ShardedOptions sharded;
    sharded.layers = layers;
    sharded.ranks = sharded_ranks;
    if (wide_steps > 0) sharded.steps = wide_steps;
    sharded.frames = frames > 0 ? frames : 20;
    return bench::run_sharded_bench(sharded);
  }
  // Ingesting 1M steps of 50,000 layers would take hours: a model that wide is measured on a
  // short run.
  constexpr int kWideLayers = 10000;
  if (wide_steps > 0 || layers > kWideLayers) {
    bench::WideOptions wide;
    wide.layers = layers;
    wide.steps = wide_steps > 0 ? wide_steps : 1000;
    wide.frames = frames > 0 ? frames : 20;
    wide.layer_detail_every = layer_detail_every;
    return bench::run_wide_bench(wide);
  }
  if (frames <= 0) frames = quick ? 20 : 60;
  if (latency_secs <= 0) latency_secs = quick ? 10 : 60;

  const std::vector<Checkpoint> checkpoints = {{10'000, 1, "10k"},
                                               {100'000, quick ? 10 : 1, "100k"},
                                               {1'000'000, quick ? 100 : 1, "1M"}};
  const keel::app::ModelConfig config;
  const int64_t window_steps = config.recent_steps;
  const int64_t layer_series = int64_t(layers) * wire::kLayerMetricCount;

  std::printf("keel-bench-app: %d layers x %d metrics, %s, %d measured frames per scene\n", layers,
              wire::kLayerMetricCount,
              quick ? "quick (every step to 10k, every 10th to 100k, every 100th to 1M)"
                    : "full (every step to 1M)",
              frames);
  std::fflush(stdout);

  bench::HeadlessUi ui(1600, 1000);
  bench::SyntheticRun run(layers, 1);
  keel::app::Model model(config);
  model.ingest(run.description());
  wire::Message message = wire::StepRecord{};
  wire::StepRecord& record = std::get<wire::StepRecord>(message);

  std::vector<Measured> results;
  int64_t next_step = 0;
  for (const Checkpoint& checkpoint : checkpoints) {
    Measured measured;
    measured.checkpoint = checkpoint;
    Clock::duration inside{};
    for (; next_step < checkpoint.steps; next_step += checkpoint.stride) {
      run.fill(next_step, record);
      const Clock::time_point start = Clock::now();
      model.ingest(message);
      inside += Clock::now() - start;
      ++measured.records;
    }
    measured.ingest_secs = std::chrono::duration<double>(inside).count();
    measured.samples_per_s = ratio(double(measured.records * layer_series), measured.ingest_secs);
    measured.bytes_used = model.bytes_used();
    measured.bytes_per_sample = ratio(double(measured.bytes_used), double(layer_series * window_steps));
    measured.views = bench::time_views_frame(ui, model, frames);
    measured.dashboard = bench::time_dashboard_frame(ui, model, frames);
    if (measured.views.frames == 0 || measured.dashboard.frames == 0) {
      std::fprintf(stderr, "keel-bench-app: the view could not be made to show the whole history at %s\n",
                   checkpoint.label);
      return 1;
    }
    std::fprintf(stderr, "keel-bench-app: %s steps: ingest %.1f s, frame %.2f ms, dashboard %.2f ms\n",
                 checkpoint.label, measured.ingest_secs, measured.views.cpu_ms_median,
                 measured.dashboard.cpu_ms_median);
    results.push_back(measured);
  }

  // The headline ingest rate: records stored at every step (sparse records also write the
  // missing slots of their gap, a different workload).
  double dense_samples = 0, dense_secs = 0;
  for (const Measured& m : results) {
    if (m.checkpoint.stride != 1) continue;
    dense_samples += double(m.records * layer_series);
    dense_secs += m.ingest_secs;
  }
  const double ingest_rate = ratio(dense_samples, dense_secs);

  // A data-parallel job: the same dashboard watching kRanks ranks of 10k steps each, which
  // adds the ranks x layers strip (every rank's layers summarised over the view, each frame).
  constexpr int kRanks = 8;
  constexpr int64_t kRankSteps = 10'000;
  bench::FrameTiming ranks_frame;
  {
    keel::app::Model ranks_model(config);
    for (int rank = 0; rank < kRanks; ++rank) {
      bench::SyntheticRun rank_run(layers, 100 + uint64_t(rank));
      wire::RunDescription description = rank_run.description();
      description.rank = rank;
      description.world_size = kRanks;
      ranks_model.ingest(description);
      for (int64_t step = 0; step < kRankSteps; ++step) {
        rank_run.fill(step, record);
        record.rank = rank;
        ranks_model.ingest(message);
      }
    }
    ranks_frame = bench::time_dashboard_frame(ui, ranks_model, frames);
  }

  const keel::app::RunModel* shown = keel::app::ui::Dashboard::shown_run(model);
  const size_t series_bound = shown->series_count() * keel::app::SeriesHistory::max_bytes(config);
  const bench::LatencyResult latency = bench::measure_step_to_pixel(ui, layers, steps_per_s, latency_secs);

  std::printf("\n%-52s %10s %10s %10s\n", "history (steps in the run)", "10k", "100k", "1M");
  const auto row = [&](const char* name, const char* format, auto value) {
    std::printf("%-52s", name);
    for (const Measured& m : results) std::printf(format, value(m));
    std::printf("\n");
  };
  row("records stored since the previous column", " %10lld",
      [](const Measured& m) { return static_cast<long long>(m.records); });
  std::printf("%-52s", "  stored every n-th step");
  for (const Measured& m : results) std::printf(" %10lld", static_cast<long long>(m.checkpoint.stride));
  std::printf("\n");
  row("ingest, M layer-samples/s", " %10.2f", [](const Measured& m) { return m.samples_per_s / 1e6; });
  row("frame: heatmap + 3 plots, CPU ms (median)", " %10.2f", [](const Measured& m) { return m.views.cpu_ms_median; });
  row("  p90", " %10.2f", [](const Measured& m) { return m.views.cpu_ms_p90; });
  row("  wall ms (median)", " %10.2f", [](const Measured& m) { return m.views.wall_ms_median; });
  row("  vertices", " %10lld", [](const Measured& m) { return static_cast<long long>(m.views.vertices); });
  row("  of which model query, heatmap alone, CPU ms", " %10.2f",
      [](const Measured& m) { return m.views.heatmap_query_ms; });
  row("frame: whole dashboard, CPU ms (median)", " %10.2f", [](const Measured& m) { return m.dashboard.cpu_ms_median; });
  row("  p90", " %10.2f", [](const Measured& m) { return m.dashboard.cpu_ms_p90; });
  row("  vertices", " %10lld", [](const Measured& m) { return static_cast<long long>(m.dashboard.vertices); });
  row("steps in view (first..last)", " %10.0f", [](const Measured& m) { return m.views.view_last - m.views.view_first; });
  row("model memory, MB", " %10.1f", [](const Measured& m) { return double(m.bytes_used) / 1e6; });
  row("bytes per layer-metric step of the 8192-step window", " %10.2f",
      [](const Measured& m) { return m.bytes_per_sample; });
  std::printf("(model query: RunModel::heatmap() alone, %d rows x %d columns, the views scene's heatmap)\n",
              layers, results.front().views.heatmap_query_columns);
  std::printf("\n%-52s %10.2f\n", "frame: whole dashboard, 8 ranks x 10k steps, CPU ms", ranks_frame.cpu_ms_median);
  std::printf("%-52s %10.2f\n", "  vs one rank at 10k (the ranks strip's share)",
              ratio(ranks_frame.cpu_ms_median, results.front().dashboard.cpu_ms_median));
  std::printf("\n%-52s %10.1f\n", "series memory bound for any run length, MB", double(series_bound) / 1e6);
  std::printf("%-52s %10.2f\n", "ingest, dense records, M layer-samples/s", ingest_rate / 1e6);
  const double growth = ratio(results.back().views.cpu_ms_median, results.front().views.cpu_ms_median);
  std::printf("%-52s %10.2f\n", "frame growth 10k -> 1M (heatmap + 3 plots)", growth);
  std::printf("%-52s %10.2f\n", "frame growth 10k -> 1M (whole dashboard)",
              ratio(results.back().dashboard.cpu_ms_median, results.front().dashboard.cpu_ms_median));
  std::printf("\nstep to pixel, %g steps/s for %g s, %d layers, the app's FramePacer and frame work:\n",
              steps_per_s, latency_secs, layers);
  std::printf("%-52s %10d / %d\n", "steps drawn / published", latency.steps_drawn, latency.steps_published);
  std::printf("%-52s %10.2f\n", "p50, ms", latency.p50_ms);
  std::printf("%-52s %10.2f\n", "p99, ms", latency.p99_ms);
  std::printf("%-52s %10.2f\n", "max, ms", latency.max_ms);
  std::printf("%-52s %10.2f\n", "  stamp to frame start, p50, ms", latency.queued_p50_ms);
  std::printf("%-52s %10.2f\n", "  frame CPU with a new step, median, ms", latency.frame_cpu_ms_median);
  std::printf("%-52s %10.2f\n", "  frame interval, median, ms", latency.frame_interval_ms);
  std::printf("%-52s %10llu\n", "  receiver queue drops", static_cast<unsigned long long>(latency.queue_dropped));

  const Measured& m10k = results[0];
  const Measured& m100k = results[1];
  const Measured& m1m = results[2];
  std::printf(
      "{\"quick\":%s,\"layers\":%d,\"metrics\":%d,\"history_stride_to_100k\":%lld,\"history_stride_to_1m\":%lld,"
      "\"ingest_samples_per_s\":%.0f,\"frame_ms_10k\":%.3f,\"frame_ms_100k\":%.3f,\"frame_ms_1m\":%.3f,"
      "\"frame_growth_10k_to_1m\":%.3f,\"dashboard_frame_ms_10k\":%.3f,\"dashboard_frame_ms_100k\":%.3f,"
      "\"dashboard_frame_ms_1m\":%.3f,\"dashboard_frame_ms_8_ranks_10k\":%.3f,\"heatmap_query_ms_10k\":%.3f,\"heatmap_query_ms_1m\":%.3f,"
      "\"bytes_per_sample\":%.3f,\"model_bytes_1m\":%zu,\"model_bytes_bound\":%zu,"
      "\"step_to_pixel_p50_ms\":%.2f,\"step_to_pixel_p99_ms\":%.2f,\"steps_drawn\":%d,\"steps_published\":%d}\n",
      quick ? "true" : "false", layers, wire::kLayerMetricCount, static_cast<long long>(m100k.checkpoint.stride),
      static_cast<long long>(m1m.checkpoint.stride), ingest_rate, m10k.views.cpu_ms_median,
      m100k.views.cpu_ms_median, m1m.views.cpu_ms_median, growth, m10k.dashboard.cpu_ms_median,
      m100k.dashboard.cpu_ms_median, m1m.dashboard.cpu_ms_median, ranks_frame.cpu_ms_median, m10k.views.heatmap_query_ms,
      m1m.views.heatmap_query_ms, m1m.bytes_per_sample, m1m.bytes_used,
      series_bound, latency.p50_ms, latency.p99_ms, latency.steps_drawn, latency.steps_published);
  return latency.steps_drawn == latency.steps_published ? 0 : 1;
}
