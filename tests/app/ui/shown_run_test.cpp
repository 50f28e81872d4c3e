// The run the dashboard's panes show when several runs share a rank (a probe per model of one
// job): pinned to the one shown first, so the other's descriptions never switch the panes;
// changed by the picker (show_run) and released by choosing a rank (show_rank).
#include <gtest/gtest.h>

#include <string>

#include "model/model.hpp"
#include "ui/app_state.hpp"
#include "ui/dashboard.hpp"
#include "ui/run_picker.hpp"

namespace keel::app::ui {
namespace {

wire::RunDescription rank0(const std::string& run_id, const std::string& model, uint64_t seq) {
  wire::RunDescription d;
  d.run_id = run_id;
  d.model = model;
  d.seq = seq;
  d.world_size = 2;   // the tests below show one rank or both of a two-rank job
  d.layers.push_back({model + ".weight", {2}, 2, "float32"});
  return d;
}

TEST(ShownRun, ADescriptionOfAnotherRunOnTheRankDoesNotSwitchThePanes) {
  Model model;
  AppState state;
  model.ingest(rank0("gan-1", "generator", 0));
  model.ingest(rank0("gan-1-2", "discriminator", 0));
  const RunModel* first = Dashboard::shown_run(model, state);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->model(), "discriminator") << "the rank's current run: described last";
  ASSERT_TRUE(state.shown_run_key().has_value()) << "two runs share rank 0: the one shown is pinned";

  model.ingest(rank0("gan-1", "generator", 1));   // re-described: now the rank's current run
  EXPECT_EQ(model.current_run(0)->model(), "generator");
  EXPECT_EQ(Dashboard::shown_run(model, state), first);

  const RunModel* generator = model.current_run(0);
  state.show_run(generator->key());                // the picker
  EXPECT_EQ(Dashboard::shown_run(model, state), generator);
  model.ingest(rank0("gan-1-2", "discriminator", 1));
  EXPECT_EQ(Dashboard::shown_run(model, state), generator);

  state.show_rank(0);                              // the ranks view: the rank's current run
  EXPECT_EQ(Dashboard::shown_run(model, state)->model(), "discriminator");
}

// keel-demo-gan's two probes attach a moment apart: the discriminator is shown alone first,
// and the generator's description (now the rank's current run) must not take the panes over.
TEST(ShownRun, ARunJoiningTheShownOnesRankDoesNotTakeThePanesOver) {
  Model model;
  AppState state;
  model.ingest(rank0("gan-1", "discriminator", 0));
  const RunModel* discriminator = Dashboard::shown_run(model, state);
  ASSERT_NE(discriminator, nullptr);
  EXPECT_FALSE(state.shown_run_key().has_value());
  model.ingest(rank0("gan-1-2", "generator", 0));
  EXPECT_EQ(model.current_run(0)->model(), "generator");
  EXPECT_EQ(Dashboard::shown_run(model, state), discriminator);
  ASSERT_TRUE(state.shown_run_key().has_value());
  EXPECT_EQ(state.shown_run_key()->model, "discriminator");
}

// Two ranks, the NaN on rank 1: the strip named rank 1 while the panes showed rank 0, with no
// red and no selection. Until the user picks a rank, the panes show the first bad one.
TEST(ShownRun, NoRankChosenShowsTheRankThatWentNonfiniteFirst) {
  Model model;
  AppState state;
  for (int32_t rank = 0; rank < 2; ++rank) {
    wire::RunDescription d = rank0("job", "", 0);
    d.rank = rank;
    model.ingest(d);
  }
  EXPECT_EQ(Dashboard::shown_run(model, state)->rank(), 0) << "nothing wrong yet: the lowest rank";
  wire::Event nan;
  nan.kind = "first_nonfinite";
  nan.run = "job";
  nan.rank = 1;
  nan.step = 30;
  nan.seq = 1;
  model.ingest(nan);
  EXPECT_EQ(Dashboard::shown_run(model, state)->rank(), 1);
  state.show_rank(0);   // the user's choice stands
  EXPECT_EQ(Dashboard::shown_run(model, state)->rank(), 0);
}

TEST(ShownRun, OneRunPerRankIsNotPinned) {
  Model model;
  AppState state;
  model.ingest(rank0("solo", "", 0));
  ASSERT_NE(Dashboard::shown_run(model, state), nullptr);
  EXPECT_FALSE(state.shown_run_key().has_value());
}

TEST(ShownRun, RunsAreLabelledByModelRunIdAndRank) {
  Model model;
  model.ingest(rank0("gan-1", "generator", 0));
  model.ingest(rank0("solo", "", 0));
  ASSERT_EQ(model.current_runs().size(), 2u);
  EXPECT_EQ(run_label(*model.find_run(wire::RunKey{"gan-1", "generator", 0})), "generator (gan-1) rank 0");
  EXPECT_EQ(run_label(*model.find_run(wire::RunKey{"solo", "", 0})), "solo rank 0");
}

}  // namespace
}  // namespace keel::app::ui
