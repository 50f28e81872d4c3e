// Backfill without sockets: the history ring and the live stream meet with neither hole nor
// duplicate, whatever arrives first; refusal, silence and restarts go live without backfill
// and say why. The merged stream is fed to the dashboard's Model to check that it stores every
// step once and counts no duplicate and no sequence gap.
#include "net/backfill.hpp"

#include <chrono>
#include <string>
#include <variant>
#include <vector>

#include <gtest/gtest.h>

#include "model/model.hpp"

namespace keel::app {
namespace {

namespace wire = keel::wire;
using Clock = Backfill::Clock;
using std::chrono::milliseconds;

wire::RunDescription run(const std::string& run_id, uint64_t seq) {
  wire::RunDescription description;
  description.run_id = run_id;
  description.seq = seq;
  description.layers = {{"fc.weight", {2, 2}, 4, "float32"}};
  return description;
}

// A live record's seq follows the description's; a history record keeps the (lower) seq it
// was first published with.
wire::StepRecord step(int64_t index, uint64_t seq) {
  wire::StepRecord record;
  record.step = index;
  record.seq = seq;
  record.metric_mask = 1;
  record.layer_count = 1;
  record.layer_values = {float(index)};
  return record;
}

wire::Ack history_ack(uint64_t id, int64_t count, int64_t newest) {
  wire::Ack ack;
  ack.id = id;
  ack.ok = true;
  ack.count = count;
  ack.step = newest;
  return ack;
}

std::vector<int64_t> steps_of(const std::vector<wire::Message>& messages) {
  std::vector<int64_t> steps;
  for (const wire::Message& message : messages) {
    if (const auto* record = std::get_if<wire::StepRecord>(&message)) steps.push_back(record->step);
  }
  return steps;
}

std::vector<int64_t> range(int64_t first, int64_t last) {
  std::vector<int64_t> out;
  for (int64_t s = first; s <= last; ++s) out.push_back(s);
  return out;
}

struct BackfillTest : ::testing::Test {
  Backfill backfill;
  Clock::time_point t0 = Clock::now();
  std::vector<wire::Message> out;

  void live(wire::Message message, Clock::time_point now) {
    backfill.on_live(std::move(message), now, out);
  }
  // The first description arrives and the request goes out with id 7.
  void attach(const std::string& run_id = "run-a", uint64_t seq = 1000) {
    live(run(run_id, seq), t0);
    ASSERT_TRUE(backfill.request_due());
    const wire::Command command = backfill.history_command(7);
    EXPECT_EQ(command.kind, "history");
    EXPECT_EQ(command.count, 1 << 20);
    EXPECT_EQ(command.rank, -1);
    backfill.request_sent(7, t0);
  }
  void history(int64_t first, int64_t last) {
    for (int64_t s = first; s <= last; ++s) backfill.on_history_step(step(s, uint64_t(s) + 1), t0);
  }
};

// Feeds the merged stream to the dashboard's model: every step once, in order.
void expect_model_stores_all(const std::vector<wire::Message>& messages, int64_t first, int64_t last) {
  Model model;
  for (const wire::Message& message : messages) model.ingest(message);
  const RunModel* current = model.current_run(0);
  ASSERT_NE(current, nullptr);
  EXPECT_EQ(current->first_step(), first);
  EXPECT_EQ(current->last_step(), last);
  EXPECT_EQ(current->counters().steps_stored, uint64_t(last - first + 1));
  EXPECT_EQ(current->counters().duplicate_steps, 0u);
  EXPECT_EQ(current->counters().seq_gaps, 0u);
}

TEST_F(BackfillTest, DropsTheOverlapAtTheSeam) {
  attach();
  ASSERT_EQ(out.size(), 1u) << "the description goes out at once";
  EXPECT_TRUE(std::holds_alternative<wire::RunDescription>(out[0]));
  // Published after the subscription went live, before the probe read its ring: both ways.
  for (int64_t s = 5; s <= 7; ++s) live(step(s, 1000 + uint64_t(s) - 4), t0);
  EXPECT_EQ(out.size(), 1u) << "live steps are held until the history is in";
  history(1, 6);
  EXPECT_EQ(out.size(), 1u);
  backfill.on_ack(history_ack(7, 6, 6), out);
  EXPECT_EQ(steps_of(out), range(1, 7));
  EXPECT_EQ(backfill.phase(), BackfillPhase::kLive);
  EXPECT_EQ(backfill.status(), "backfilled 4 steps (1..4)");
  live(step(8, 1004), t0);
  EXPECT_EQ(steps_of(out), range(1, 8));
  expect_model_stores_all(out, 1, 8);
}

TEST_F(BackfillTest, NoLiveStepYetDropsLiveStepsTheHistoryHad) {
  attach();
  history(0, 9);
  backfill.on_ack(history_ack(7, 10, 9), out);
  EXPECT_EQ(steps_of(out), range(0, 9));
  // Still on their way on the telemetry socket when the ack came.
  live(step(8, 1001), t0);
  live(step(9, 1002), t0);
  live(step(10, 1003), t0);
  live(step(11, 1004), t0);
  EXPECT_EQ(steps_of(out), range(0, 11));
  EXPECT_EQ(backfill.status(), "backfilled 10 steps (0..9)");
}

TEST_F(BackfillTest, EmptyHistoryDeliversTheLiveStream) {
  attach();
  live(step(3, 1001), t0);
  backfill.on_ack(history_ack(7, 0, -1), out);
  EXPECT_EQ(steps_of(out), std::vector<int64_t>{3});
  EXPECT_EQ(backfill.status(), "backfilled no steps: the probe's history was empty; live from step 3");
  live(step(4, 1002), t0);
  EXPECT_EQ(steps_of(out), range(3, 4));
}

// The ring's oldest step is not older than the first live one (the ring was read after the
// live stream began and nothing older was kept): the status says where the run starts.
TEST_F(BackfillTest, HistoryNoOlderThanTheLiveStreamSaysWhereTheRunStarts) {
  attach();
  live(step(5, 1001), t0);
  history(5, 6);
  backfill.on_ack(history_ack(7, 2, 6), out);
  EXPECT_EQ(steps_of(out), std::vector<int64_t>{5});
  EXPECT_EQ(backfill.status(),
            "backfilled no steps: the live stream already began before the probe's history; live from step 5");
}

TEST_F(BackfillTest, SilenceGoesLiveWithoutBackfillAndIgnoresALateAnswer) {
  attach();
  live(step(40, 1001), t0 + milliseconds(500));
  backfill.on_tick(t0 + milliseconds(1900), out);
  EXPECT_EQ(backfill.phase(), BackfillPhase::kWaiting);
  EXPECT_TRUE(steps_of(out).empty());
  backfill.on_tick(t0 + milliseconds(2100), out);
  EXPECT_EQ(backfill.phase(), BackfillPhase::kLive);
  EXPECT_EQ(steps_of(out), std::vector<int64_t>{40});
  EXPECT_EQ(backfill.status(), "no backfill: no answer to the history request within 2 s");
  EXPECT_EQ(backfill.outcomes(), 1u);
  history(0, 39);
  backfill.on_ack(history_ack(7, 40, 39), out);
  EXPECT_EQ(steps_of(out), std::vector<int64_t>{40}) << "a late answer must not rewind the stream";
}

TEST_F(BackfillTest, HistoryStillStreamingInIsNotCutOff) {
  attach();
  for (int64_t s = 0; s < 30; ++s) {
    backfill.on_history_step(step(s, uint64_t(s) + 1), t0 + milliseconds(100 * s));
    backfill.on_tick(t0 + milliseconds(100 * s), out);
  }
  EXPECT_EQ(backfill.phase(), BackfillPhase::kWaiting);
  backfill.on_ack(history_ack(7, 30, 29), out);
  EXPECT_EQ(steps_of(out), range(0, 29));
}

TEST_F(BackfillTest, RefusalGoesLiveAndSaysWhy) {
  attach();
  live(step(12, 1001), t0);
  wire::Ack refusal;
  refusal.id = 7;
  refusal.error = "not supported by this probe yet";
  backfill.on_ack(refusal, out);
  EXPECT_EQ(steps_of(out), std::vector<int64_t>{12});
  EXPECT_EQ(backfill.status(),
            "no backfill: the probe refused the history request: not supported by this probe yet");
}

TEST_F(BackfillTest, ARequestThatCannotBeSentGoesLive) {
  live(run("run-a", 1), t0);
  live(step(1, 2), t0);
  backfill.request_failed("the endpoint has no port + 1 for a command socket", out);
  EXPECT_EQ(steps_of(out), std::vector<int64_t>{1});
  EXPECT_EQ(backfill.status(), "no backfill: the endpoint has no port + 1 for a command socket");
}

TEST_F(BackfillTest, AStepBeforeAnyDescriptionIsHeldAndStartsTheRequest) {
  live(step(100, 500), t0);
  EXPECT_TRUE(out.empty());
  EXPECT_TRUE(backfill.request_due());
  backfill.request_sent(3, t0);
  for (int64_t s = 90; s <= 100; ++s) backfill.on_history_step(step(s, uint64_t(s)), t0);
  backfill.on_ack(history_ack(3, 11, 100), out);
  EXPECT_EQ(steps_of(out), range(90, 100));
}

TEST_F(BackfillTest, AnotherRequestsAnswerIsThrownAway) {
  attach();
  history(0, 4);                               // these answer request 6, given up on
  backfill.on_ack(history_ack(6, 5, 4), out);
  EXPECT_EQ(backfill.phase(), BackfillPhase::kWaiting);
  history(2, 4);
  backfill.on_ack(history_ack(7, 3, 4), out);
  EXPECT_EQ(steps_of(out), range(2, 4));
}

TEST_F(BackfillTest, TooManyHeldMessagesGoLiveWithoutBackfill) {
  BackfillOptions options;
  options.max_held = 3;
  backfill = Backfill(options);
  attach();
  for (int64_t s = 1; s <= 4; ++s) live(step(s, 1000 + uint64_t(s)), t0);
  EXPECT_EQ(steps_of(out), range(1, 4));
  EXPECT_EQ(backfill.phase(), BackfillPhase::kLive);
  EXPECT_EQ(backfill.status(), "no backfill: 3 live messages arrived before the history did");
}

TEST_F(BackfillTest, ATrainerRestartWithANewRunIdBackfillsTheNewRun) {
  attach("run-a", 1000);
  history(0, 9);
  backfill.on_ack(history_ack(7, 10, 9), out);
  live(step(10, 1001), t0);
  // The trainer restarts: its new probe's first message to us is its description.
  live(run("run-b", 50), t0);
  EXPECT_TRUE(backfill.request_due());
  EXPECT_TRUE(std::holds_alternative<wire::RunDescription>(out.back()));
  backfill.request_sent(8, t0);
  live(step(3, 51), t0);
  live(step(4, 52), t0);
  for (int64_t s = 0; s <= 3; ++s) backfill.on_history_step(step(s, uint64_t(s) + 1), t0);
  backfill.on_ack(history_ack(8, 4, 3), out);
  EXPECT_EQ(backfill.status(), "backfilled 3 steps (0..2)");

  Model model;
  for (const wire::Message& message : out) model.ingest(message);
  const RunModel* old_run = model.find_run("run-a", 0);
  const RunModel* new_run = model.find_run("run-b", 0);
  ASSERT_NE(old_run, nullptr);
  ASSERT_NE(new_run, nullptr);
  EXPECT_EQ(old_run->counters().steps_stored, 11u);
  EXPECT_EQ(new_run->first_step(), 0);
  EXPECT_EQ(new_run->last_step(), 4);
  EXPECT_EQ(new_run->counters().steps_stored, 5u);
  EXPECT_EQ(new_run->counters().duplicate_steps, 0u);
  EXPECT_EQ(new_run->counters().seq_gaps, 0u);
}

TEST_F(BackfillTest, ARestartWhileWaitingDeliversTheOldRunAsItCameAndAsksAgain) {
  attach("run-a", 1000);
  live(step(20, 1001), t0);
  live(run("run-b", 1), t0);
  EXPECT_EQ(steps_of(out), std::vector<int64_t>{20});
  EXPECT_EQ(backfill.status(), "no backfill for run run-a: the trainer restarted as run run-b");
  EXPECT_TRUE(backfill.request_due());
  backfill.on_ack(history_ack(7, 0, -1), out);  // the old request's answer, if it ever comes
  EXPECT_EQ(backfill.phase(), BackfillPhase::kWaiting);
  backfill.request_sent(8, t0);
  live(step(1, 2), t0);
  backfill.on_history_step(step(0, 1), t0);
  backfill.on_ack(history_ack(8, 1, 0), out);
  EXPECT_EQ(steps_of(out), (std::vector<int64_t>{20, 0, 1}));
}

TEST_F(BackfillTest, AReSentDescriptionOfTheSameRunChangesNothing) {
  attach();
  history(0, 2);
  backfill.on_ack(history_ack(7, 3, 2), out);
  const uint64_t outcomes = backfill.outcomes();
  live(run("run-a", 1010), t0);
  EXPECT_FALSE(backfill.request_due());
  EXPECT_EQ(backfill.outcomes(), outcomes);
  EXPECT_TRUE(std::holds_alternative<wire::RunDescription>(out.back()));
}

wire::Event event(int64_t at_step, uint64_t seq, const std::string& kind) {
  wire::Event e;
  e.step = at_step;
  e.seq = seq;
  e.kind = kind;
  e.layer = "fc.weight";
  return e;
}

std::vector<std::string> events_of(const std::vector<wire::Message>& messages) {
  std::vector<std::string> kinds;
  for (const wire::Message& message : messages) {
    if (const auto* e = std::get_if<wire::Event>(&message)) {
      kinds.push_back(e->kind + "@" + std::to_string(e->step));
    }
  }
  return kinds;
}

// The probe's one sequence over steps 0..9 and two events: step s has seq s, or s + 1 after
// the event of step 3, or s + 2 after the event of step 7.
uint64_t seq_of_step(int64_t s) { return uint64_t(s) + (s > 3 ? 1 : 0) + (s > 7 ? 1 : 0); }

TEST_F(BackfillTest, EventsFromBeforeTheAttachAreBackfilledOnce) {
  attach("run-a", 100);
  // Live from step 6 on: the event of step 7 arrives live and in the history.
  for (int64_t s = 6; s <= 9; ++s) {
    live(step(s, seq_of_step(s)), t0);
    if (s == 7) live(event(7, 9, "skip"), t0);
  }
  history(0, 8);  // (their seqs do not matter to the step seam)
  backfill.on_history_event(event(3, 4, "first_nonfinite"), t0);
  backfill.on_history_event(event(7, 9, "skip"), t0);
  backfill.on_ack(history_ack(7, 9, 8), out);
  EXPECT_EQ(events_of(out), (std::vector<std::string>{"first_nonfinite@3", "skip@7"}));
  EXPECT_EQ(steps_of(out), range(0, 9));
  EXPECT_EQ(backfill.status(), "backfilled 6 steps (0..5), 1 event");

  Model model;
  for (const wire::Message& message : out) model.ingest(message);
  ASSERT_NE(model.current_run(0), nullptr);
  ASSERT_EQ(model.current_run(0)->events().size(), 2u);
  EXPECT_EQ(model.current_run(0)->events().front().kind, "skip") << "newest first";
}

TEST_F(BackfillTest, NoLiveMessageYetDropsLiveEventsTheHistoryHad) {
  attach("run-a", 100);
  history(0, 9);
  backfill.on_history_event(event(3, 4, "first_nonfinite"), t0);
  backfill.on_history_event(event(7, 9, "skip"), t0);
  backfill.on_ack(history_ack(7, 10, 9), out);
  EXPECT_EQ(events_of(out), (std::vector<std::string>{"first_nonfinite@3", "skip@7"}));
  // Still on their way on the telemetry socket when the ack came, then news.
  live(event(7, 9, "skip"), t0);
  live(step(9, seq_of_step(9)), t0);
  live(event(10, 12, "dump"), t0);
  live(event(7, 9, "skip"), t0);   // a true replay after news is not the seam's business
  EXPECT_EQ(events_of(out), (std::vector<std::string>{"first_nonfinite@3", "skip@7", "dump@10", "skip@7"}));
}

TEST_F(BackfillTest, HistoryEventsOfAnAbandonedRequestAreThrownAway) {
  attach();
  backfill.on_history_event(event(3, 4, "first_nonfinite"), t0);
  backfill.on_ack(history_ack(99, 0, -1), out);   // another request's ack
  backfill.on_ack(history_ack(7, 0, -1), out);
  EXPECT_TRUE(events_of(out).empty());
}

}  // namespace
}  // namespace keel::app

namespace keel::app {
namespace {

// Layers {names...} of a run that started at one time (the probe's start_unix_ms).
wire::RunDescription layout(uint64_t seq, std::vector<std::string> names) {
  wire::RunDescription description = run("run-a", seq);
  description.start_unix_ms = 1700000000000;
  description.layers.clear();
  for (const std::string& name : names) description.layers.push_back({name, {1}, 1, "float32"});
  return description;
}

// grad_norm of each layer is 10 * step + (its index in the record).
wire::StepRecord step_of_layers(int64_t index, uint64_t seq, uint32_t layers) {
  wire::StepRecord record = step(index, seq);
  record.layer_count = layers;
  record.layer_values.clear();
  for (uint32_t i = 0; i < layers; ++i) record.layer_values.push_back(float(10 * index + i));
  return record;
}

// The model changed within the history (PROTOCOL §3.2): "extra" was added before "fc.weight"
// at step 3. The history carries both descriptions between its records; each record must be
// read with its own layers, and the dashboard must end on the live stream's.
TEST_F(BackfillTest, AHistoryAcrossAChangeOfLayersDeliversEachRecordWithItsLayers) {
  live(layout(100, {"extra", "fc.weight"}), t0);   // the live description: the new layers
  ASSERT_TRUE(backfill.request_due());
  backfill.request_sent(7, t0);
  live(step_of_layers(6, 101, 2), t0);
  backfill.on_history_description(layout(0, {"fc.weight"}), t0);
  for (int64_t s = 0; s < 3; ++s) backfill.on_history_step(step_of_layers(s, uint64_t(s) + 1, 1), t0);
  backfill.on_history_description(layout(4, {"extra", "fc.weight"}), t0);
  for (int64_t s = 3; s < 6; ++s) backfill.on_history_step(step_of_layers(s, uint64_t(s) + 2, 2), t0);
  backfill.on_ack(history_ack(7, 6, 5), out);
  EXPECT_EQ(steps_of(out), range(0, 6));
  EXPECT_EQ(backfill.status(), "backfilled 6 steps (0..5)");

  Model model;
  for (const wire::Message& message : out) model.ingest(message);
  const RunModel* current = model.current_run(0);
  ASSERT_NE(current, nullptr);
  ASSERT_EQ(current->layer_count(), 2u);
  ASSERT_EQ(current->layer_name(0), "extra");
  ASSERT_EQ(current->layer_name(1), "fc.weight");
  float value = -1;
  for (int64_t s = 0; s <= 6; ++s) {
    const float fc = float(10 * s + (s < 3 ? 0 : 1));   // its index was 0 before the change, 1 after
    ASSERT_TRUE(current->layer_series(1, wire::LayerMetric::kGradNorm).value_at(s, &value)) << "step " << s;
    EXPECT_EQ(value, fc) << "fc.weight at step " << s;
    EXPECT_EQ(current->layer_series(0, wire::LayerMetric::kGradNorm).value_at(s, &value), s >= 3)
        << "extra exists from step 3 only; step " << s;
  }
  EXPECT_EQ(current->counters().seq_gaps, 0u);
  EXPECT_EQ(current->counters().duplicate_steps, 0u);
  EXPECT_EQ(model.run_count(), 1u) << "the history's descriptions are of the same run and start";
}

// A history with no change of layers carries no description and delivers none.
TEST_F(BackfillTest, AHistoryWithoutAChangeDeliversNoDescription) {
  attach();
  history(0, 2);
  backfill.on_ack(history_ack(7, 3, 2), out);
  size_t descriptions = 0;
  for (const wire::Message& message : out) descriptions += std::holds_alternative<wire::RunDescription>(message);
  EXPECT_EQ(descriptions, 1u) << "only the live one";
}

}  // namespace
}  // namespace keel::app
