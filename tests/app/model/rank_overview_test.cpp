// Rank overview: the first rank to go non-finite (by step, then the probe's stamp), kept
// however many events follow it, the newest warning of any rank, and the rank x layer cells (per-layer summaries covering a
// step range, non-finite kept, missing ranks without data).
#include "model/rank_overview.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace keel::app {
namespace {

constexpr size_t kLayers = 3;

wire::RunDescription description(int32_t rank) {
  wire::RunDescription d;
  d.run_id = "run-rank-" + std::to_string(rank);
  d.rank = rank;
  d.world_size = 4;
  for (size_t l = 0; l < kLayers; ++l) d.layers.push_back({"layer" + std::to_string(l), {2}, 2, "float32"});
  return d;
}

// grad_norm of layer l at `at` on `rank`: (rank + 1) * 10 + l + at / 1000, or `poison` for
// the layer named.
wire::StepRecord step(int32_t rank, int64_t at, int poisoned_layer = -1) {
  wire::StepRecord r;
  r.step = at;
  r.rank = rank;
  r.layer_count = kLayers;
  r.metric_mask = 1;  // grad_norm
  for (size_t l = 0; l < kLayers; ++l) {
    r.layer_values.push_back(int(l) == poisoned_layer ? std::numeric_limits<float>::quiet_NaN()
                                                      : float((rank + 1) * 10 + int(l)) + float(at) / 1000.0f);
  }
  return r;
}

wire::Event first_nonfinite(int32_t rank, int64_t at, const std::string& layer, int64_t stamp) {
  wire::Event e;
  e.rank = rank;
  e.step = at;
  e.kind = "first_nonfinite";
  e.layer = layer;
  e.stamp_unix_ns = stamp;
  return e;
}

wire::Event other(int32_t rank, int64_t at) {
  wire::Event e;
  e.rank = rank;
  e.step = at;
  e.kind = "skip";
  return e;
}

TEST(RankOverview, NoRankHasGoneNonfiniteYet) {
  Model model;
  model.ingest(description(0));
  model.ingest(step(0, 0));
  EXPECT_FALSE(first_nonfinite_rank(model).has_value());
}

TEST(RankOverview, TheEarliestStepWinsThenTheEarlierStamp) {
  Model model;
  for (int32_t rank : {0, 1, 2}) model.ingest(description(rank));
  model.ingest(first_nonfinite(0, 120, "layer2", 5000));
  model.ingest(first_nonfinite(2, 80, "layer1", 9000));
  model.ingest(first_nonfinite(1, 80, "layer0", 7000));   // same step as rank 2, stamped earlier
  const auto first = first_nonfinite_rank(model);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->rank, 1);
  EXPECT_EQ(first->step, 80);
  EXPECT_EQ(first->layer, "layer0");
}

TEST(RankOverview, TheFirstEpisodeIsKeptPastTheBoundedEventList) {
  ModelConfig config;
  config.max_events = 4;
  Model model(config);
  model.ingest(description(0));
  model.ingest(description(1));
  model.ingest(first_nonfinite(1, 10, "layer1", 100));
  for (int i = 0; i < 20; ++i) model.ingest(other(1, 11 + i));           // evicts it from the list
  model.ingest(first_nonfinite(1, 50, "layer2", 200));                   // a later episode
  model.ingest(first_nonfinite(0, 30, "layer0", 150));
  const auto first = first_nonfinite_rank(model);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->rank, 1);
  EXPECT_EQ(first->step, 10);
  EXPECT_EQ(first->layer, "layer1");
}

// The banner's warning: the newest of any rank's run, stamped last, whichever rank it is on.
TEST(RankOverview, TheNewestWarningOfAnyRankIsTheOneStampedLast) {
  Model model;
  for (int32_t rank : {0, 1}) model.ingest(description(rank));
  EXPECT_FALSE(newest_warning(model).has_value());
  const auto warning = [](int32_t rank, int64_t at, int64_t stamp, const std::string& signal) {
    wire::Event e = other(rank, at);
    e.run = "run-rank-" + std::to_string(rank);
    e.kind = "warning";
    e.stamp_unix_ns = stamp;
    e.warning = wire::Warning{signal, 2.0, 1.0, 0.1, 10, "lower the learning rate"};
    return e;
  };
  model.ingest(warning(0, 300, 9000, "grad_norm"));
  model.ingest(warning(1, 310, 9500, "loss_scale"));
  model.ingest(warning(0, 320, 9400, "update_ratio"));
  const auto newest = newest_warning(model);
  ASSERT_TRUE(newest.has_value());
  EXPECT_EQ(newest->run->rank(), 1);
  EXPECT_EQ(newest->event->warning->signal, "loss_scale");
}

TEST(RankOverview, CellsCoverTheRangePerLayerAndKeepNonfinite) {
  Model model;
  for (int32_t rank : {0, 1}) {
    model.ingest(description(rank));
    for (int64_t at = 0; at < 2000; ++at) model.ingest(step(rank, at, rank == 1 && at == 1800 ? 2 : -1));
  }
  std::vector<Summary> cells;
  const std::vector<int32_t> ranks = {0, 1, 3};   // rank 3 never sent anything
  rank_layer_cells(model, ranks, wire::LayerMetric::kGradNorm, 1000, 1499, kLayers, cells);
  ASSERT_EQ(cells.size(), ranks.size() * kLayers);
  for (size_t r = 0; r < 2; ++r) {
    for (size_t l = 0; l < kLayers; ++l) {
      const Summary& cell = cells[r * kLayers + l];
      const float base = float((r + 1) * 10 + l);
      // Every step of the range is covered; like any heatmap column, the stored buckets that
      // cover it reach less than one bucket (at most 500 steps here) past its edges.
      EXPECT_LE(cell.min, base + 1.0f) << "rank " << r << " layer " << l;
      EXPECT_GE(cell.max, base + 1.499f) << "rank " << r << " layer " << l;
      EXPECT_GT(cell.min, base + 0.5f) << "rank " << r << " layer " << l;
      EXPECT_LT(cell.max, base + 2.0f) << "rank " << r << " layer " << l;
      EXPECT_FALSE(cell.has_nonfinite());
    }
  }
  for (size_t l = 0; l < kLayers; ++l) EXPECT_FALSE(cells[2 * kLayers + l].has_data()) << "rank 3 layer " << l;

  // A range holding rank 1's NaN: that cell says so, its neighbours do not.
  rank_layer_cells(model, ranks, wire::LayerMetric::kGradNorm, 1000, 1999, kLayers, cells);
  EXPECT_TRUE(cells[1 * kLayers + 2].has_nan());
  EXPECT_FALSE(cells[1 * kLayers + 1].has_nonfinite());
  EXPECT_FALSE(cells[0 * kLayers + 2].has_nonfinite());
}

}  // namespace
}  // namespace keel::app
