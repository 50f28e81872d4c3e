// keel-bench-app's sharded-job scene; see app_bench_sharded.hpp.

#include "app_bench_sharded.hpp"

#include <chrono>
#include <cstdio>
#include <string>
#include <variant>
#include <vector>

#include "app_bench_data.hpp"
#include "app_bench_frame.hpp"
#include "median.hpp"
#include "model/model.hpp"

namespace keel::bench {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

}  // namespace

int run_sharded_bench(const ShardedOptions& options) {
  std::printf("keel-bench-app: a sharded job, %d ranks x %d layers x %d metrics, %lld per-layer steps from every rank, "
              "%d measured frames\n",
              options.ranks, options.layers, wire::kLayerMetricCount, static_cast<long long>(options.steps),
              options.frames);
  std::fflush(stdout);

  HeadlessUi ui(1600, 1000);
  app::Model model(app::ModelConfig{});
  // One synthetic run per rank (the same layer names, each rank's own values), described as
  // the ranks of one sharded job.
  std::vector<SyntheticRun> ranks;
  std::vector<wire::RunDescription> descriptions;
  for (int rank = 0; rank < options.ranks; ++rank) {
    ranks.emplace_back(options.layers, uint64_t(rank) + 1);
    wire::RunDescription description = ranks.back().description();
    description.run_id += "-rank" + std::to_string(rank);
    description.rank = rank;
    description.world_size = options.ranks;
    description.sharded = true;
    model.ingest(description);
    descriptions.push_back(std::move(description));
  }
  wire::Message message = wire::StepRecord{};
  wire::StepRecord& record = std::get<wire::StepRecord>(message);
  const auto fill = [&](int rank, int64_t step) {
    ranks[size_t(rank)].fill(step, record);
    record.run = descriptions[size_t(rank)].run_id;
    record.rank = rank;
  };

  // Rank by rank, as a job's ranks step together: every rank but the last stores its record,
  // the last one's completes the step. The first step makes every series and is left out.
  std::vector<double> own_ms, completing_ms;
  for (int64_t step = 0; step <= options.steps; ++step) {
    for (int rank = 0; rank < options.ranks; ++rank) {
      fill(rank, step);
      const Clock::time_point start = Clock::now();
      model.ingest(message);
      const double took = ms_since(start);
      if (step > 0) (rank + 1 == options.ranks ? completing_ms : own_ms).push_back(took);
    }
  }
  const bool combined = model.job_layer_values().layer_count() == size_t(options.layers) &&
                        model.job_layer_values().last_step() == options.steps;
  if (!combined) {
    std::fprintf(stderr, "keel-bench-app: the job's layers were not combined at its last step\n");
    return 1;
  }
  int64_t step = options.steps + 1;
  const FrameTiming dashboard = time_dashboard_frame(ui, model, options.frames);
  const FrameTiming live = time_dashboard_frame(ui, model, options.frames, [&] {
    for (int rank = 0; rank < options.ranks; ++rank) {
      fill(rank, step);
      model.ingest(message);
    }
    ++step;
  });
  if (dashboard.frames == 0 || live.frames == 0) {
    std::fprintf(stderr, "keel-bench-app: the view could not be made to show the whole history\n");
    return 1;
  }
  const double own = median(own_ms), completing = median(completing_ms);
  std::printf("\n%-60s %12.2f\n", "a rank's own per-layer record, ingest ms (median)", own);
  std::printf("%-60s %12.2f\n", "the record completing a step (job combined), ms (median)", completing);
  std::printf("%-60s %12.2f\n", "  the job's combine, ms (the difference)", completing - own);
  std::printf("%-60s %12.2f\n", "frame: whole dashboard with the job row, CPU ms (median)", dashboard.cpu_ms_median);
  std::printf("%-60s %12.2f\n", "  p90", dashboard.cpu_ms_p90);
  std::printf("%-60s %12.2f\n", "frame with a new step from every rank, CPU ms (median)", live.cpu_ms_median);
  std::printf("%-60s %12.1f\n", "Model::bytes_used after the run, MB", double(model.bytes_used()) / 1e6);
  std::printf("%-60s %12.1f\n", "  of which the job's layers, MB", double(model.job_layer_values().bytes_used()) / 1e6);
  std::printf(
      "{\"mode\":\"sharded\",\"ranks\":%d,\"layers\":%d,\"steps\":%lld,\"ingest_ms_own_record\":%.3f,"
      "\"ingest_ms_completing_record\":%.3f,\"dashboard_frame_ms\":%.3f,\"dashboard_frame_ms_new_step\":%.3f,"
      "\"model_bytes\":%zu,\"job_layer_bytes\":%zu}\n",
      options.ranks, options.layers, static_cast<long long>(options.steps), own, completing,
      dashboard.cpu_ms_median, live.cpu_ms_median, model.bytes_used(), model.job_layer_values().bytes_used());
  return 0;
}

}  // namespace keel::bench
