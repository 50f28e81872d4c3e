// The events pane's rows (issue 13): repeated events fold into one row, and the run's
// first_nonfinite stays pinned above them.
#include "model/event_rows.hpp"

#include <gtest/gtest.h>

#include "model/run_model.hpp"

namespace keel::app {
namespace {

wire::Event event(int64_t step, const std::string& kind, const std::string& detail, const std::string& layer = "") {
  wire::Event e;
  e.step = step;
  e.seq = uint64_t(step) * 2 + (kind == "skip" ? 1 : 0);
  e.kind = kind;
  e.detail = detail;
  e.layer = layer;
  return e;
}

// A NaN at step 38, then every step skipped: one row for the hundred skips, first_nonfinite
// still on top.
TEST(EventRows, AHundredRepeatedSkipsAreOneRowUnderThePinnedFirstNonfinite) {
  RunModel run("r", 0, ModelConfig{});
  run.add_event(event(38, "first_nonfinite", "non-finite gradient values in fc1.weight", "fc1.weight"));
  for (int64_t s = 38; s < 138; ++s) run.add_event(event(s, "skip", "update skipped: nonfinite (non-finite gradient values)"));
  const std::vector<EventRow> rows = event_rows(run.events(), run.first_nonfinite());
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_TRUE(rows[0].pinned);
  EXPECT_EQ(rows[0].newest->kind, "first_nonfinite");
  EXPECT_EQ(rows[0].newest->layer, "fc1.weight");
  EXPECT_EQ(rows[1].count, 100u);
  EXPECT_EQ(event_row_title(rows[1]), "skip x100, steps 38-137");
  EXPECT_EQ(rows[1].newest->detail, "update skipped: nonfinite (non-finite gradient values)");
}

// Only events that repeat one another fold: another kind, layer or detail between them
// starts a new row, and the order stays the probe's.
TEST(EventRows, OnlyRunsOfTheSameEventFold) {
  std::deque<wire::Event> events;   // newest first
  events.push_front(event(1, "skip", "update skipped: command"));
  events.push_front(event(2, "skip", "update skipped: command"));
  events.push_front(event(3, "spike", "grad norm 9 is 7 sigma above"));
  events.push_front(event(4, "skip", "update skipped: command"));
  events.push_front(event(5, "skip", "update skipped: spike"));
  const std::vector<EventRow> rows = event_rows(events, std::nullopt);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(event_row_title(rows[0]), "skip");
  EXPECT_EQ(rows[0].newest->step, 5);
  EXPECT_EQ(event_row_title(rows[1]), "skip");
  EXPECT_EQ(event_row_title(rows[2]), "spike");
  EXPECT_EQ(event_row_title(rows[3]), "skip x2, steps 1-2");
  EXPECT_FALSE(rows[3].pinned);
}

// The bounded event list may have dropped first_nonfinite long ago: it is still pinned.
TEST(EventRows, TheFirstNonfiniteIsPinnedAfterTheListDroppedIt) {
  ModelConfig config;
  config.max_events = 10;
  RunModel run("r", 0, config);
  run.add_event(event(5, "first_nonfinite", "non-finite loss"));
  for (int64_t s = 5; s < 50; ++s) run.add_event(event(s, "dump", "wrote step-" + std::to_string(s)));
  const std::vector<EventRow> rows = event_rows(run.events(), run.first_nonfinite());
  ASSERT_EQ(rows.size(), 11u);
  EXPECT_TRUE(rows[0].pinned);
  EXPECT_EQ(rows[0].newest->step, 5);
}

// The events pane shows and copies a dump's path whole: the probe's sentence was cut to
// "wrote keel-dumps/step-200-non..." where the pane was narrow.
TEST(EventRows, ADumpsPathIsReadWholeFromItsEvent) {
  const std::string path = "/home/u/run (copy)/keel-dumps/step-200-nonfinite";
  EXPECT_EQ(dump_path(event(200, "dump", "wrote " + path + " (123456 bytes, 0.42 s)")), path);
  EXPECT_EQ(dump_path(event(200, "dump", "wrote " + path)), path) << "no sizes: the rest is the path";
  EXPECT_EQ(dump_path(event(200, "dump_failed", "wrote " + path + " (1 bytes, 0 s)")), "");
  EXPECT_EQ(dump_path(event(200, "skip", "update skipped")), "");

  RunModel run("r", 0, ModelConfig{});
  run.add_event(event(200, "first_nonfinite", "non-finite gradient values", "fc1.weight"));
  run.add_event(event(200, "dump", "wrote /d/step-200-nonfinite (10 bytes, 0.1 s)"));
  run.add_event(event(200, "skip", "update skipped: nonfinite"));
  run.add_event(event(900, "dump", "wrote /d/step-900-manual (10 bytes, 0.1 s)"));
  EXPECT_EQ(dump_path_at(run.events(), 200), "/d/step-200-nonfinite");
  EXPECT_EQ(dump_path_at(run.events(), 900), "/d/step-900-manual");
  EXPECT_EQ(dump_path_at(run.events(), 201), "");
}

}  // namespace
}  // namespace keel::app
