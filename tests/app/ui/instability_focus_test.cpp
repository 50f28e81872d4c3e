// InstabilityFocus (issue 13): the first non-finite selects its layer and step once, asks the
// views to scroll to it and marks its step; a spike selects the loudest layer only while
// nothing is selected; the user's own selection afterwards stands.
#include "ui/instability_focus.hpp"

#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace keel::app::ui {
namespace {

wire::RunDescription three_layers() {
  wire::RunDescription d;
  d.run_id = "r";
  for (const char* name : {"fc1.weight", "fc2.weight", "head.weight"}) d.layers.push_back({name, {1}, 1, "float32"});
  return d;
}

// grad_norm per layer at `step`.
wire::StepRecord record(int64_t step, std::vector<float> norms, uint64_t seq) {
  wire::StepRecord r;
  r.step = step;
  r.seq = seq;
  r.metric_mask = 1;   // grad_norm only
  r.layer_count = uint32_t(norms.size());
  r.layer_values = std::move(norms);
  return r;
}

wire::Event event(const std::string& kind, int64_t step, const std::string& layer, uint64_t seq) {
  wire::Event e;
  e.kind = kind;
  e.step = step;
  e.layer = layer;
  e.seq = seq;
  return e;
}

TEST(InstabilityFocus, TheFirstNonfiniteIsSelectedOnceAndMarked) {
  RunModel run("r", 0, ModelConfig{});
  run.describe(three_layers());
  AppState state;
  InstabilityFocus focus;
  focus.update(run, state);
  EXPECT_EQ(state.selected_layer(), -1);
  EXPECT_EQ(state.marked_step(), -1);

  run.add_step(record(30, {1, std::numeric_limits<float>::quiet_NaN(), 1}, 1));
  run.add_event(event("first_nonfinite", 30, "fc2.weight", 2));
  focus.update(run, state);
  EXPECT_EQ(state.selected_layer(), 1);
  EXPECT_EQ(state.selected_layer_name(), "fc2.weight");
  EXPECT_EQ(state.selected_step(), 30);
  EXPECT_EQ(state.marked_step(), 30);
  state.begin_frame(0, 30);
  EXPECT_TRUE(state.scroll_to_selection()) << "the views scroll to it in this frame";
  state.begin_frame(0, 30);
  EXPECT_FALSE(state.scroll_to_selection()) << "once";

  state.select(2, "head.weight", 12);   // the user looks elsewhere
  focus.update(run, state);
  EXPECT_EQ(state.selected_layer(), 2) << "the user's choice stands";
  EXPECT_EQ(state.marked_step(), 30);
}

// Attached late (step 1,320) to a run whose NaN was at step 200: the app opens on step 200 in
// every plot, not on the newest 400 steps.
TEST(InstabilityFocus, AttachingLateOpensOnTheFirstNonfinitesStep) {
  RunModel run("r", 0, ModelConfig{});
  run.describe(three_layers());
  for (int64_t step = 0; step <= 1320; ++step) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    run.add_step(record(step, {1, step == 200 ? nan : 1.0f, 1}, uint64_t(step) + 1));
  }
  run.add_event(event("first_nonfinite", 200, "fc2.weight", 5000));
  AppState state;
  state.begin_frame(run.first_step(), run.last_step());
  InstabilityFocus focus;
  focus.update(run, state);
  state.begin_frame(run.first_step(), run.last_step());
  EXPECT_EQ(state.selected_layer_name(), "fc2.weight");
  EXPECT_LE(state.view_first(), 200);
  EXPECT_GE(state.view_last(), 200);
  EXPECT_FALSE(state.follow_live());
}

// A late attach can deliver the event before the records of its step: the view goes there
// once they have come, not while the plots are still empty (and then follows live past it).
TEST(InstabilityFocus, AnEventBeforeItsStepsOpensOnItWhenTheyCome) {
  RunModel run("r", 0, ModelConfig{});
  run.describe(three_layers());
  run.add_event(event("first_nonfinite", 200, "fc2.weight", 1));
  AppState state;
  InstabilityFocus focus;
  focus.update(run, state);
  state.begin_frame(0, 0);   // no steps yet
  EXPECT_TRUE(state.follow_live());
  for (int64_t step = 0; step <= 876; ++step) run.add_step(record(step, {1, 1, 1}, uint64_t(step) + 2));
  focus.update(run, state);
  state.begin_frame(run.first_step(), run.last_step());
  EXPECT_FALSE(state.follow_live());
  EXPECT_LE(state.view_first(), 200);
  EXPECT_GE(state.view_last(), 200);
}

// What a click on an event row and the F key do: the layer and the step, in every view.
TEST(InstabilityFocus, GoingToAnEventMovesTheViewAndKeepsTheLayerOfARunWideOne) {
  RunModel run("r", 0, ModelConfig{});
  run.describe(three_layers());
  AppState state;
  state.begin_frame(0, 2000);
  go_to(run, state, 700, "head.weight");
  state.begin_frame(0, 2000);
  EXPECT_EQ(state.selected_layer(), 2);
  EXPECT_EQ(state.selected_step(), 700);
  EXPECT_DOUBLE_EQ((state.view_first() + state.view_last()) / 2, 700);
  go_to(run, state, 1000, "");   // a run-wide event (a skip, a dump)
  state.begin_frame(0, 2000);
  EXPECT_EQ(state.selected_layer_name(), "head.weight");
  EXPECT_EQ(state.selected_step(), 1000);
  EXPECT_DOUBLE_EQ((state.view_first() + state.view_last()) / 2, 1000);
}

// Before a click, the detail pane shows the layer loudest over the view: a non-finite one
// first, else the largest norm, only within the steps asked about.
TEST(InstabilityFocus, TheLoudestLayerOverARangeIsItsNonfiniteOneElseItsLargest) {
  RunModel run("r", 0, ModelConfig{});
  run.describe(three_layers());
  EXPECT_EQ(loudest_layer_over(run, 0, 100), -1) << "no steps";
  run.add_step(record(10, {5, 1, 1}, 1));
  run.add_step(record(20, {1, 1, 9}, 2));
  run.add_step(record(30, {1, std::numeric_limits<float>::infinity(), 1}, 3));
  EXPECT_EQ(loudest_layer_over(run, 10, 20), 2);
  EXPECT_EQ(loudest_layer_over(run, 10, 15), 0);
  EXPECT_EQ(loudest_layer_over(run, 10, 30), 1);
  EXPECT_EQ(loudest_layer_over(run, 40, 50), -1) << "no samples there";
}

TEST(InstabilityFocus, ASpikeSelectsTheLoudestLayerOnlyWhileNothingIsSelected) {
  RunModel run("r", 0, ModelConfig{});
  run.describe(three_layers());
  AppState state;
  InstabilityFocus focus;
  run.add_step(record(50, {1, 2, 900}, 1));
  run.add_event(event("spike", 50, "", 2));
  focus.update(run, state);
  EXPECT_EQ(state.selected_layer_name(), "head.weight");
  EXPECT_EQ(state.selected_step(), 50);
  EXPECT_EQ(state.marked_step(), -1) << "a spike is not a non-finite";

  run.add_step(record(60, {800, 2, 1}, 3));
  run.add_event(event("spike", 60, "", 4));
  focus.update(run, state);
  EXPECT_EQ(state.selected_layer_name(), "head.weight") << "something is selected already";
  EXPECT_EQ(state.selected_step(), 50);
}

TEST(InstabilityFocus, ANonfiniteLossGoesToItsStepAndKeepsTheLayer) {
  RunModel run("r", 0, ModelConfig{});
  run.describe(three_layers());
  AppState state;
  state.select(0, "fc1.weight", 3);
  InstabilityFocus focus;
  run.add_event(event("first_nonfinite", 40, "", 1));
  focus.update(run, state);
  EXPECT_EQ(state.selected_layer_name(), "fc1.weight");
  EXPECT_EQ(state.selected_step(), 40);
  EXPECT_EQ(state.marked_step(), 40);
}

}  // namespace
}  // namespace keel::app::ui
