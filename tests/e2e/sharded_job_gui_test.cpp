// A sharded job seen by the real dashboard in a real X server: two publishers speaking the
// protocol as ranks 0 and 1 of a job whose parameters are partitioned across them (their runs
// say `sharded`), each holding part of each layer, and one metric of rank 1's part of one layer
// NaN at one step. The ranks x layers strip gains a "job" row under the ranks' (each layer's
// whole value of the strip's metric, the ranks' shards combined): its cell of that layer is
// non-finite, as rank 1's is, and rank 0's is not. Once for the default metric (grad norm),
// once for the update ratio (`--heat-metric update_ratio`), whose combining needs every rank's
// weights' norm too.
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "child_process.hpp"
#include "ranks_strip.hpp"
#include "test_publisher.hpp"

#define STB_IMAGE_IMPLEMENTATION
#include <stb_image.h>

namespace {

using keel::app::test_support::ServerAuth;
using keel::app::test_support::TestPublisher;
using keel::e2e::ChildProcess;
using keel::e2e::nonfinite_pixels;
using keel::e2e::parse_ranks_strip;
using keel::e2e::RanksStrip;
namespace wire = keel::wire;

constexpr size_t kLayers = 4;
constexpr size_t kNanLayer = 2;
// The dashboard's screenshot, seconds after it starts; the job's row must show before the
// last steps go out, 3 seconds earlier.
constexpr int kScreenshotSecs = 15;

wire::RunDescription shard_run(int32_t rank) {
  wire::RunDescription run;
  run.run_id = "sharded-job-rank" + std::to_string(rank);
  run.seq = 1;
  run.rank = rank;
  run.world_size = 2;
  run.sharded = true;
  run.start_unix_ms = 1795000000000;
  for (size_t l = 0; l < kLayers; ++l) {
    run.layers.push_back({"blocks." + std::to_string(l) + ".weight", {8}, 8, "float32"});
  }
  return run;
}

// Every metric of every layer: this rank's part's grad norm 0.1 (l + 1), no non-finite
// elements, every other metric 0.01, and `poisoned` NaN in rank 1's part of kNanLayer at `nan_step`.
wire::StepRecord shard_record(const wire::RunDescription& run, int64_t step, int64_t nan_step,
                              wire::LayerMetric poisoned) {
  wire::StepRecord record;
  record.run = run.run_id;
  record.rank = run.rank;
  record.seq = static_cast<uint64_t>(step) + 2;
  record.step = step;
  record.layer_count = kLayers;
  record.layer_values.assign(kLayers * wire::kLayerMetricCount, 0.01f);
  for (size_t l = 0; l < kLayers; ++l) {
    record.layer_values[l] = 0.1f * float(l + 1);  // grad_norm's block
    record.layer_values[size_t(wire::LayerMetric::kGradNonfinite) * kLayers + l] = 0;
  }
  if (run.rank == 1 && step == nan_step) {
    record.layer_values[size_t(poisoned) * kLayers + kNanLayer] = std::numeric_limits<float>::quiet_NaN();
  }
  double sumsq = 0;
  for (size_t l = 0; l < kLayers; ++l) sumsq += double(record.layer_values[l]) * record.layer_values[l];
  record.grad_norm = std::sqrt(sumsq);
  return record;
}

// The job's two ranks publish until the dashboard (started with `extra_args`) draws the strip
// with its job row, then the NaN in `poisoned` and five steps more. Returns the strip as last
// drawn; `png` is the dashboard's screenshot.
RanksStrip watch_job(wire::LayerMetric poisoned, const std::vector<std::string>& extra_args, const std::string& png) {
  TestPublisher ranks[2] = {TestPublisher(ServerAuth::kUsersOwnKey), TestPublisher(ServerAuth::kUsersOwnKey)};
  const wire::RunDescription runs[2] = {shard_run(0), shard_run(1)};
  std::remove(png.c_str());
  std::vector<std::string> argv = {KEEL_PATH, "--verbose", "--connect", ranks[0].endpoint(), "--connect",
                                   ranks[1].endpoint(), "--screenshot", png, "--screenshot-after",
                                   std::to_string(kScreenshotSecs)};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  ChildProcess keel(argv);
  // Step after step (one each tenth of a second) until the strip has its job row: both
  // subscriptions are live by then (a PUB socket drops what it sends before). The NaN goes out
  // in the next step.
  RanksStrip strip;
  int64_t step = 0;
  for (; !(parse_ranks_strip(keel.wait_for("keel: ranks", 0.1), strip) && strip.job == 1); ++step) {
    if (step >= (kScreenshotSecs - 3) * 10) {
      ADD_FAILURE() << "no job row in time: " << keel.output();
      return {};
    }
    for (int r = 0; r < 2; ++r) {
      ranks[r].send(runs[r]);
      ranks[r].send(shard_record(runs[r], step, -1, poisoned));
    }
  }
  const int64_t nan_step = step;
  for (; step <= nan_step + 5; ++step) {
    for (int r = 0; r < 2; ++r) ranks[r].send(shard_record(runs[r], step, nan_step, poisoned));
  }
  EXPECT_FALSE(keel.find_or_wait_for("keel: screenshot", 60).empty()) << keel.output();
  EXPECT_EQ(keel.wait_exit(), 0);
  const std::string output = keel.output();
  EXPECT_TRUE(parse_ranks_strip(output.substr(output.rfind("keel: ranks")), strip)) << output;
  return strip;
}

// The screenshot's non-finite cells: rank 1's and the job's of kNanLayer, none of rank 0's or
// of the job's other layers.
void expect_the_nan_in_rank_one_and_the_job(const RanksStrip& strip, const std::string& png) {
  EXPECT_EQ(strip.ranks, 2);
  EXPECT_EQ(strip.layers, int(kLayers));
  ASSERT_EQ(strip.job, 1);
  int width = 0, height = 0, channels = 0;
  unsigned char* pixels = stbi_load(png.c_str(), &width, &height, &channels, 3);
  ASSERT_NE(pixels, nullptr) << "cannot read " << png;
  // Non-finite pixels in row `row` (0, 1: the ranks; 2: the job), in layer `layer`'s column.
  auto nonfinite = [&](int row, size_t layer) {
    return nonfinite_pixels(pixels, width, height, strip, row, int(layer), int(layer));
  };
  EXPECT_GT(nonfinite(1, kNanLayer), 4) << "rank 1's NaN cell is not shown: " << png;
  EXPECT_GT(nonfinite(2, kNanLayer), 4) << "the job's cell of the layer is not non-finite: " << png;
  EXPECT_EQ(nonfinite(0, kNanLayer), 0) << "rank 0's part was finite: " << png;
  EXPECT_EQ(nonfinite(2, kNanLayer - 1), 0) << "the job's other layers were finite: " << png;
  stbi_image_free(pixels);
}

TEST(ShardedJobGui, TheRanksStripsJobRowShowsTheWholeLayerAndOneRanksNaN) {
  const std::string png = testing::TempDir() + "keel_sharded_job_gui_test.png";
  const RanksStrip strip = watch_job(wire::LayerMetric::kGradNorm, {}, png);
  EXPECT_EQ(strip.metric, "grad_norm");
  expect_the_nan_in_rank_one_and_the_job(strip, png);
}

// Until 49f099e the job row was drawn for grad norm alone: on any other metric the strip had
// none (`job 0`).
TEST(ShardedJobGui, TheJobRowFollowsTheHeatmapsMetric) {
  const std::string png = testing::TempDir() + "keel_sharded_job_update_ratio_gui_test.png";
  const RanksStrip strip = watch_job(wire::LayerMetric::kUpdateRatio, {"--heat-metric", "update_ratio"}, png);
  EXPECT_EQ(strip.metric, "update_ratio");
  expect_the_nan_in_rank_one_and_the_job(strip, png);
}

}  // namespace
