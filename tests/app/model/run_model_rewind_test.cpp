// A rewound run (docs/rewind.md): after a `rewind` event, the records numbered from the
// snapshot's step again are the continuation, stored; the steps they replace are kept as an
// abandoned span; a replay of the same steps is still a replay. Fed through Model::ingest with
// the seq numbers a probe gives them, one message after another on one socket.
#include <gtest/gtest.h>

#include <string>

#include "keel/wire/vocabulary.hpp"
#include "model/model.hpp"

namespace keel::app {
namespace {

using wire::LayerMetric;

constexpr int kLayers = 3;

// One probe's stream: every message takes the next seq.
class Stream {
 public:
  explicit Stream(Model& model) : model_(model) {
    wire::RunDescription description;
    description.run_id = "rw";
    description.seq = next_seq_++;
    for (int i = 0; i < kLayers; ++i) description.layers.push_back({"l" + std::to_string(i), {4}, 4, "float32"});
    model_.ingest(description);
  }
  // A record at `step` whose loss is `loss` and layer i's grad norm loss + i.
  void step(int64_t step, double loss, bool in_order = true) {
    wire::StepRecord record;
    record.run = "rw";
    record.step = step;
    record.seq = in_order ? next_seq_++ : 1;
    record.loss = loss;
    record.layer_count = kLayers;
    record.metric_mask = 1u << static_cast<int>(LayerMetric::kGradNorm);
    for (int i = 0; i < kLayers; ++i) record.layer_values.push_back(static_cast<float>(loss + i));
    model_.ingest(record);
  }
  void rewind_event(int64_t from, int64_t to, bool in_order = true) {
    wire::Event event;
    event.run = "rw";
    event.seq = in_order ? next_seq_++ : 1;
    event.step = from;
    event.kind = wire::event_kind::kRewind;
    event.detail = "rewound from step " + std::to_string(from) + " to step " + std::to_string(to) + " (a command)";
    model_.ingest(event);
  }
  const RunModel& run() const { return *model_.find_run("rw", 0); }

 private:
  Model& model_;
  uint64_t next_seq_ = 1;
};

float loss_at(const SeriesHistory& series, int64_t step) {
  float value = -1;
  return series.value_at(step, &value) ? value : -1;
}

TEST(RunModelRewind, TheContinuationIsStoredAndTheAbandonedSpanKept) {
  Model model(ModelConfig{});
  Stream stream(model);
  for (int64_t s = 0; s < 200; ++s) stream.step(s, 1.0);
  stream.rewind_event(199, 100);
  for (int64_t s = 100; s <= 150; ++s) stream.step(s, 2.0);

  const RunModel& run = stream.run();
  EXPECT_EQ(run.counters().duplicate_steps, 0u) << "the continuation is not a duplicate";
  EXPECT_EQ(run.counters().rewinds, 1u);
  EXPECT_EQ(run.last_step(), 150);
  const SeriesHistory& loss = run.global_series(GlobalSeries::kLoss);
  EXPECT_EQ(loss_at(loss, 99), 1.0f);
  EXPECT_EQ(loss_at(loss, 100), 2.0f);
  EXPECT_EQ(loss_at(loss, 150), 2.0f);
  EXPECT_EQ(loss_at(loss, 151), -1.0f) << "past the continuation the live series has nothing";
  EXPECT_EQ(loss.columns(0, 199, 1).front().value.max, 2.0f) << "no abandoned value in the live series";
  EXPECT_EQ(loss_at(run.layer_series(2, LayerMetric::kGradNorm), 120), 4.0f);
  EXPECT_EQ(run.layer_series(2, LayerMetric::kGradNorm).columns(0, 199, 1).front().value.max, 4.0f);

  ASSERT_EQ(run.abandoned_spans().size(), 1u);
  EXPECT_EQ(run.abandoned_spans()[0].first_step, 100);
  EXPECT_EQ(run.abandoned_spans()[0].last_step, 199);
  EXPECT_EQ(run.last_shown_step(), 199);
  const SeriesHistory* abandoned = run.abandoned_global(0, GlobalSeries::kLoss);
  ASSERT_NE(abandoned, nullptr);
  const Column whole = abandoned->columns(100, 199, 1).front();
  EXPECT_EQ(whole.value.min, 1.0f);
  EXPECT_EQ(whole.value.max, 1.0f);
  EXPECT_LE(whole.first_step, 100);
  EXPECT_GE(whole.last_step, 199);
  EXPECT_EQ(abandoned->columns(199, 199, 1).front().value.max, 1.0f);
  const SeriesHistory* layer = run.abandoned_layer(0, 1, LayerMetric::kGradNorm);
  ASSERT_NE(layer, nullptr);
  EXPECT_EQ(layer->columns(100, 199, 1).front().value.max, 2.0f);
  EXPECT_EQ(run.abandoned_layer(0, 5, LayerMetric::kGradNorm), nullptr);
}

TEST(RunModelRewind, TheInterruptedStepMayComeAfterTheEvent) {
  // The probe raises the event in the step it interrupts, then sends that step's record.
  Model model(ModelConfig{});
  Stream stream(model);
  for (int64_t s = 0; s < 50; ++s) stream.step(s, 1.0);
  stream.rewind_event(50, 20);
  stream.step(50, 9.0);   // skipped, skip_reason "rewind"
  stream.step(20, 3.0);
  const RunModel& run = stream.run();
  ASSERT_EQ(run.abandoned_spans().size(), 1u);
  EXPECT_EQ(run.abandoned_spans()[0].first_step, 20);
  EXPECT_EQ(run.abandoned_spans()[0].last_step, 50);
  EXPECT_EQ(loss_at(run.global_series(GlobalSeries::kLoss), 20), 3.0f);
}

TEST(RunModelRewind, AReplayIsStillAReplay) {
  Model model(ModelConfig{});
  Stream stream(model);
  for (int64_t s = 0; s < 100; ++s) stream.step(s, 1.0);
  // A history reply: lower seq, steps going back. Without a rewind event...
  for (int64_t s = 40; s < 60; ++s) stream.step(s, 5.0, /*in_order=*/false);
  EXPECT_EQ(stream.run().counters().duplicate_steps, 20u);
  // ...and with one replayed among them: neither starts a continuation.
  stream.rewind_event(99, 40, /*in_order=*/false);
  stream.step(45, 5.0, /*in_order=*/false);
  EXPECT_TRUE(stream.run().abandoned_spans().empty());
  EXPECT_EQ(stream.run().last_step(), 99);
  // A live rewind event, then a replayed record going back: still a replay; the live
  // continuation after it is the rewind's.
  stream.rewind_event(100, 70);
  stream.step(71, 5.0, /*in_order=*/false);
  EXPECT_TRUE(stream.run().abandoned_spans().empty());
  stream.step(70, 6.0);
  ASSERT_EQ(stream.run().abandoned_spans().size(), 1u);
  EXPECT_EQ(stream.run().abandoned_spans()[0].first_step, 70);
  EXPECT_EQ(loss_at(stream.run().global_series(GlobalSeries::kLoss), 69), 1.0f);
  EXPECT_EQ(loss_at(stream.run().global_series(GlobalSeries::kLoss), 70), 6.0f);
}

TEST(RunModelRewind, AStepGoingBackWithoutAnEventIsADuplicate) {
  Model model(ModelConfig{});
  Stream stream(model);
  for (int64_t s = 0; s < 30; ++s) stream.step(s, 1.0);
  stream.step(10, 2.0);
  EXPECT_EQ(stream.run().counters().duplicate_steps, 1u);
  EXPECT_TRUE(stream.run().abandoned_spans().empty());
  // An event whose continuation never came (a step past it arrives instead) is forgotten.
  stream.rewind_event(30, 10);
  stream.step(30, 1.0);
  stream.step(31, 1.0);
  stream.step(10, 2.0);
  EXPECT_TRUE(stream.run().abandoned_spans().empty());
  EXPECT_EQ(stream.run().counters().duplicate_steps, 2u);
}

TEST(RunModelRewind, SeveralRewindsKeepTheNewestSpansWithinTheirShare) {
  ModelConfig config;
  config.memory_budget = size_t{64} << 20;
  Model model(config);
  Stream stream(model);
  int64_t step = 0;
  for (int round = 0; round < 6; ++round) {
    for (int64_t end = step + 300; step < end; ++step) stream.step(step, 10.0 + round);
    stream.rewind_event(step - 1, step - 100);
    step -= 100;
  }
  stream.step(step, 99.0);
  const RunModel& run = stream.run();
  EXPECT_EQ(run.counters().rewinds, 6u);
  ASSERT_EQ(run.abandoned_spans().size(), RunModel::kMaxAbandonedSpans);
  EXPECT_EQ(run.counters().spans_evicted, 2u);
  // The newest span is the last round's, its values the loss of that round.
  const AbandonedSpan& newest = run.abandoned_spans().back();
  EXPECT_EQ(newest.first_step, step);
  EXPECT_EQ(run.abandoned_global(RunModel::kMaxAbandonedSpans - 1, GlobalSeries::kLoss)
                ->columns(newest.first_step, newest.last_step, 1).front().value.max, 15.0f);
  size_t span_bytes = 0;
  for (const AbandonedSpan& span : run.abandoned_spans()) span_bytes += span.bytes_used();
  EXPECT_LE(span_bytes, config.abandoned_share());
  EXPECT_EQ(loss_at(run.global_series(GlobalSeries::kLoss), step), 99.0f);
  EXPECT_EQ(loss_at(run.global_series(GlobalSeries::kLoss), step - 1), 15.0f);
}

TEST(RunModelRewind, ARunTooWideForItsShareKeepsTheGlobalSeriesOfItsSpan) {
  ModelConfig config;
  // 6 KB a span: the 8 global series at their smallest fit it, 3 layers' metrics more do not.
  config.memory_budget = size_t{2} << 20;
  Model model(config);
  Stream stream(model);
  for (int64_t s = 0; s < 40; ++s) stream.step(s, 1.0);
  stream.rewind_event(39, 10);
  stream.step(10, 2.0);
  const RunModel& run = stream.run();
  ASSERT_EQ(run.abandoned_spans().size(), 1u);
  EXPECT_NE(run.abandoned_global(0, GlobalSeries::kLoss), nullptr);
  EXPECT_EQ(run.abandoned_layer(0, 0, LayerMetric::kGradNorm), nullptr);
  EXPECT_LE(run.abandoned_spans()[0].bytes_used(), config.abandoned_share() / RunModel::kMaxAbandonedSpans);
}

}  // namespace
}  // namespace keel::app
