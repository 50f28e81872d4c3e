// Model: messages routed by (run_id, model, rank), or by rank for messages that do not name
// their run; a new run_id starts a new run and the old one keeps its history; records of
// another layout are refused; decode errors, acks and the run bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "model/model.hpp"

namespace keel::app {
namespace {

wire::RunDescription description(const std::string& run_id, int32_t rank, uint64_t seq, int64_t start_unix_ms = 0) {
  wire::RunDescription d;
  d.run_id = run_id;
  d.rank = rank;
  d.seq = seq;
  d.start_unix_ms = start_unix_ms;
  d.world_size = std::max(8, rank + 1);   // a job of 8 ranks, as a probe would say
  d.layers.push_back({"fc.weight", {2}, 2, "float32"});
  return d;
}

// One probe of several in a process: its model's layers, named after the model.
wire::RunDescription model_description(const std::string& run_id, const std::string& model,
                                       size_t layers) {
  wire::RunDescription d = description(run_id, 0, 0);
  d.model = model;
  d.layers.clear();
  for (size_t i = 0; i < layers; ++i) {
    d.layers.push_back({model + "." + std::to_string(i) + ".weight", {2}, 2, "float32"});
  }
  return d;
}

wire::StepRecord step(int64_t at, int32_t rank, uint64_t seq, float value) {
  wire::StepRecord r;
  r.step = at;
  r.rank = rank;
  r.seq = seq;
  r.layer_count = 1;
  r.metric_mask = 1;  // grad_norm
  r.layer_values = {value};
  return r;
}

// A record of `run`: every layer's grad_norm is `value` + its index.
wire::StepRecord step_of(const wire::RunDescription& run, int64_t at, uint64_t seq, float value) {
  wire::StepRecord r = step(at, run.rank, seq, value);
  r.run = run.run_id;
  r.model = run.model;
  r.layer_count = static_cast<uint32_t>(run.layers.size());
  r.layer_values.clear();
  for (uint32_t i = 0; i < r.layer_count; ++i) {
    r.layer_values.push_back(value + static_cast<float>(i));
  }
  return r;
}

float grad_norm_at(const RunModel& run, int64_t at, size_t layer = 0) {
  float value = -1;
  run.layer_series(layer, wire::LayerMetric::kGradNorm).value_at(at, &value);
  return value;
}

TEST(Model, NewRunIdStartsANewRunAndTheOldKeepsItsHistory) {
  Model model;
  model.ingest(description("first", 0, 0));
  model.ingest(step(0, 0, 1, 1.0f));
  model.ingest(step(1, 0, 2, 2.0f));
  model.ingest(description("first", 0, 3));  // periodic re-send: same run
  EXPECT_EQ(model.run_count(), 1u);

  model.ingest(description("second", 0, 0));  // the trainer restarted
  model.ingest(step(0, 0, 1, 5.0f));
  ASSERT_EQ(model.run_count(), 2u);
  const RunModel* first = model.find_run("first", 0);
  const RunModel* second = model.find_run("second", 0);
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(model.current_run(0), second);
  EXPECT_EQ(grad_norm_at(*first, 1), 2.0f);
  EXPECT_EQ(first->counters().steps_stored, 2u);
  EXPECT_EQ(grad_norm_at(*second, 0), 5.0f);
  EXPECT_EQ(second->counters().duplicate_steps, 0u) << "step 0 again is a new run, not a duplicate";
  EXPECT_EQ(second->counters().seq_rewinds, 0u);
}

// A job restarted under the same run_id (resumed from its checkpoint at step 1): its steps are
// a new segment of the run, not duplicates of the first start's; the first keeps its history.
TEST(Model, ARunIdStartedAgainIsANewSegmentNotDuplicates) {
  Model model;
  model.ingest(description("job", 0, 0, 1000));
  model.ingest(step(0, 0, 1, 1.0f));
  model.ingest(step(1, 0, 2, 2.0f));
  model.ingest(step(2, 0, 3, 3.0f));

  model.ingest(description("job", 0, 0, 2000));
  model.ingest(step(1, 0, 1, 7.0f));
  model.ingest(step(2, 0, 2, 8.0f));
  model.ingest(description("job", 0, 3, 2000));   // periodic re-send: same segment
  ASSERT_EQ(model.run_count(), 2u);
  const RunModel& first = model.run(0);
  const RunModel* second = model.current_run(0);
  ASSERT_EQ(second, &model.run(1));
  EXPECT_EQ(model.find_run("job", 0), second) << "the newest segment";
  EXPECT_EQ(first.segment(), 1);
  EXPECT_EQ(second->segment(), 2);
  EXPECT_EQ(second->first_step(), 1);
  EXPECT_EQ(grad_norm_at(*second, 2), 8.0f);
  EXPECT_EQ(second->counters().duplicate_steps, 0u);
  EXPECT_EQ(second->counters().steps_stored, 2u);
  EXPECT_EQ(grad_norm_at(first, 2), 3.0f) << "the first start keeps its history";
  EXPECT_EQ(first.counters().steps_stored, 3u);

  model.ingest(description("job", 0, 4, 3000));
  EXPECT_EQ(model.current_run(0)->segment(), 3);
}

// A description that does not say when it started (start_unix_ms 0) never starts a segment.
TEST(Model, AnUnknownStartIsTheSameSegment) {
  Model model;
  model.ingest(description("job", 0, 0, 1000));
  model.ingest(description("job", 0, 1, 0));
  model.ingest(description("job", 0, 2, 1000));
  EXPECT_EQ(model.run_count(), 1u);
}

TEST(Model, RecordsBeforeAnyDescriptionAdoptTheRunIdLater) {
  Model model;
  model.ingest(step(100, 3, 50, 1.0f));
  ASSERT_EQ(model.run_count(), 1u);
  EXPECT_EQ(model.run(0).run_id(), "");
  model.ingest(description("late", 3, 51));
  ASSERT_EQ(model.run_count(), 1u);
  EXPECT_EQ(model.run(0).run_id(), "late");
  EXPECT_EQ(grad_norm_at(model.run(0), 100), 1.0f);
  EXPECT_EQ(model.run(0).counters().seq_gaps, 0u);
}

// A GAN's generator and discriminator: two probes in one process, both rank 0 of world 1, each
// re-describing its run every few seconds. Each record goes to the run it names, whichever
// probe described last, so neither model's values show under the other's layer names.
TEST(Model, TwoProbesOnOneRankKeepTheirOwnRuns) {
  Model model;
  const wire::RunDescription generator = model_description("gan", "generator", 2);
  const wire::RunDescription critic = model_description("gan", "critic", 3);
  model.ingest(generator);
  model.ingest(critic);
  model.ingest(step_of(generator, 0, 1, 10.0f));
  model.ingest(step_of(critic, 0, 1, 20.0f));
  model.ingest(generator);   // periodic re-send: rank 0's current run flips to the generator
  model.ingest(step_of(critic, 1, 2, 21.0f));
  model.ingest(step_of(generator, 1, 3, 11.0f));

  ASSERT_EQ(model.run_count(), 2u);
  const RunModel* g = model.find_run(wire::RunKey{"gan", "generator", 0});
  const RunModel* c = model.find_run(wire::RunKey{"gan", "critic", 0});
  ASSERT_NE(g, nullptr);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(g->model(), "generator");
  EXPECT_EQ(c->model(), "critic");
  ASSERT_EQ(g->layer_count(), 2u);
  ASSERT_EQ(c->layer_count(), 3u);
  EXPECT_EQ(g->layer_name(1), "generator.1.weight");
  EXPECT_EQ(c->layer_name(2), "critic.2.weight");
  EXPECT_EQ(grad_norm_at(*g, 0, 1), 11.0f);
  EXPECT_EQ(grad_norm_at(*g, 1, 1), 12.0f);
  EXPECT_EQ(grad_norm_at(*c, 0, 2), 22.0f);
  EXPECT_EQ(grad_norm_at(*c, 1, 2), 23.0f);
  EXPECT_EQ(g->counters().steps_stored, 2u);
  EXPECT_EQ(c->counters().steps_stored, 2u);
  EXPECT_EQ(g->counters().seq_rewinds, 0u) << "each probe's seq counted on its own run";
  EXPECT_EQ(c->counters().seq_rewinds, 0u);
  EXPECT_EQ(model.counters().refused_records, 0u);
  EXPECT_EQ(model.current_run(0), g) << "the run rank 0 described last";
  EXPECT_EQ(model.current_runs(), (std::vector<const RunModel*>{g, c}));
  EXPECT_EQ(model.ranks(), (std::vector<int32_t>{0}));
}

// Two probes left with their default run_ids (one differs from the other) and no model names;
// records before either description (the app attached mid-run) start a run of their own
// identity, which its description then finds.
TEST(Model, RecordsThatNameTheirRunFindItBeforeAndAfterItsDescription) {
  Model model;
  wire::RunDescription first = model_description("host-1-100", "", 1);
  wire::RunDescription second = model_description("host-1-100-2", "", 2);
  first.seq = second.seq = 11;
  model.ingest(step_of(second, 5, 10, 1.0f));
  model.ingest(step_of(first, 5, 10, 3.0f));
  ASSERT_EQ(model.run_count(), 2u);
  EXPECT_EQ(model.current_run(0), model.find_run(wire::RunKey{"host-1-100-2", "", 0}))
      << "before any description, the rank's first run";
  model.ingest(first);
  model.ingest(second);
  model.ingest(step_of(first, 6, 12, 4.0f));
  model.ingest(step_of(second, 6, 12, 2.0f));
  ASSERT_EQ(model.run_count(), 2u) << "each description found its run";
  const RunModel* a = model.find_run(wire::RunKey{"host-1-100", "", 0});
  const RunModel* b = model.find_run(wire::RunKey{"host-1-100-2", "", 0});
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_TRUE(a->described());
  EXPECT_TRUE(b->described());
  EXPECT_EQ(a->layer_name(0), ".0.weight");
  EXPECT_EQ(grad_norm_at(*a, 6), 4.0f);
  EXPECT_EQ(grad_norm_at(*b, 6, 1), 3.0f);
  EXPECT_EQ(a->counters().steps_stored, 2u);
  EXPECT_EQ(b->counters().steps_stored, 2u);
  EXPECT_EQ(a->counters().seq_gaps, 0u);
}

// A record whose layer count is not its run's described one holds another layout's values by
// index: refused and counted, never stored under the run's names.
TEST(Model, ARecordOfAnotherLayoutIsRefusedAndCounted) {
  Model model;
  const wire::RunDescription run = model_description("job", "generator", 2);
  model.ingest(run);
  model.ingest(step_of(run, 0, 1, 1.0f));
  wire::StepRecord wider = step_of(model_description("job", "generator", 3), 1, 2, 9.0f);
  EXPECT_TRUE(model.ingest(wider)) << "the counters changed";
  wire::StepRecord untagged = step(2, 0, 3, 9.0f);   // an older probe's record, 1 layer of 2
  model.ingest(untagged);
  model.ingest(step_of(run, 3, 4, 5.0f));

  const RunModel& held = *model.current_run(0);
  EXPECT_EQ(held.counters().refused_records, 2u);
  EXPECT_EQ(model.counters().refused_records, 2u);
  EXPECT_EQ(held.counters().steps_stored, 2u);
  EXPECT_EQ(held.layer_count(), 2u);
  EXPECT_EQ(grad_norm_at(held, 1), -1.0f) << "nothing stored at the refused step";
  EXPECT_EQ(grad_norm_at(held, 3, 1), 6.0f);
  EXPECT_EQ(held.last_step(), 3);
}

TEST(Model, RanksAreSeparateRuns) {
  Model model;
  model.ingest(description("job", 0, 0));
  model.ingest(description("job", 1, 0));
  model.ingest(step(0, 0, 1, 1.0f));
  model.ingest(step(0, 1, 1, 2.0f));
  ASSERT_EQ(model.run_count(), 2u);
  EXPECT_EQ(grad_norm_at(*model.find_run("job", 0), 0), 1.0f);
  EXPECT_EQ(grad_norm_at(*model.find_run("job", 1), 0), 2.0f);
  EXPECT_EQ(model.ranks(), (std::vector<int32_t>{0, 1}));
}

// The status bar's figure: every rank's newest count of probe failures, for one run only.
TEST(Model, ProbeErrorsAreSummedOverTheRanksOfARun) {
  Model model;
  model.ingest(description("job", 0, 0));
  model.ingest(description("job", 1, 0));
  model.ingest(description("other", 2, 0));
  auto failed = [](wire::StepRecord r, uint64_t errors) {
    r.probe_errors = errors;
    return r;
  };
  model.ingest(failed(step(0, 0, 1, 1.0f), 1));
  model.ingest(failed(step(0, 1, 1, 1.0f), 2));
  model.ingest(failed(step(1, 1, 2, 1.0f), 4));   // cumulative: the newest counts
  model.ingest(failed(step(0, 2, 1, 1.0f), 8));
  EXPECT_EQ(model.probe_errors("job"), 5u);
  EXPECT_EQ(model.probe_errors("other"), 8u);
  EXPECT_EQ(model.probe_errors("none"), 0u);
}

TEST(Model, GapsAndDuplicatesAreCountedPerRun) {
  Model model;
  model.ingest(description("job", 0, 0));
  model.ingest(step(0, 0, 1, 1.0f));
  model.ingest(step(1, 0, 4, 1.0f));   // seq 2 and 3 lost
  model.ingest(step(1, 0, 5, 1.0f));   // same step again
  wire::Event event;
  event.seq = 9;                        // 6..8 lost
  model.ingest(event);
  const RunCounters& counters = model.current_run(0)->counters();
  EXPECT_EQ(counters.messages, 5u);
  EXPECT_EQ(counters.seq_gaps, 2u);
  EXPECT_EQ(counters.seq_missing, 5u);
  EXPECT_EQ(counters.duplicate_steps, 1u);
  EXPECT_EQ(counters.steps_stored, 2u);
}

TEST(Model, AcksAndCommands) {
  ModelConfig config;
  config.max_acks = 2;
  Model bounded(config);
  for (uint64_t id = 1; id <= 3; ++id) {
    wire::Ack ack;
    ack.id = id;
    ack.ok = true;
    EXPECT_TRUE(bounded.ingest(ack));
  }
  ASSERT_EQ(bounded.acks().size(), 2u);
  EXPECT_EQ(bounded.acks()[0].id, 3u);
  EXPECT_EQ(bounded.acks()[1].id, 2u);
  const uint64_t revision = bounded.revision();
  EXPECT_FALSE(bounded.ingest(wire::Command{}));
  EXPECT_EQ(bounded.revision(), revision);
  EXPECT_EQ(bounded.run_count(), 0u);
}

TEST(Model, OldestIdleRunIsDroppedAtTheBound) {
  ModelConfig config;
  config.max_runs = 2;
  Model model(config);
  model.ingest(description("a", 0, 0));
  model.ingest(description("b", 0, 0));
  model.ingest(description("other-rank", 1, 0));
  // "a" was idle (rank 0 moved to "b"); "b" and rank 1's run are streaming.
  EXPECT_EQ(model.find_run("a", 0), nullptr);
  EXPECT_NE(model.find_run("b", 0), nullptr);
  EXPECT_NE(model.find_run("other-rank", 1), nullptr);
  EXPECT_EQ(model.counters().runs_evicted, 1u);
}

}  // namespace
}  // namespace keel::app
