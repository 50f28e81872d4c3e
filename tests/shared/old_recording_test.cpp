// A recording written by keel-demo at commit 8f64548 (before each message's fields were
// defined in one table) still opens and decodes, field for field, and re-encodes to the very
// bytes it was read from: the table changed how the codec is written, not the wire.
// The fixture: keel-demo --steps 8 --cause batch:4 --scaler --width 16 --layers 1 --heads 2
// --context 16 --batch 2 (18 layers; step 4 overflows, is skipped and has a cause).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "keel/wire/codec.hpp"
#include "keel/wire/recording_reader.hpp"

namespace keel::wire {
namespace {

struct Decoded {
  std::vector<RunDescription> runs;
  std::vector<StepRecord> steps;
  std::vector<Event> events;
};

Decoded read_fixture() {
  std::string error;
  auto reader = RecordingReader::open(KEEL_OLD_RECORDING, error);
  EXPECT_TRUE(reader) << error;
  Decoded out;
  if (!reader) return out;
  std::vector<std::string> errors;
  reader->read_all(
      [&](const RecordingFrame& frame) {
        const DecodeResult result = decode(frame.data, frame.size);
        ASSERT_TRUE(result.ok) << result.error;
        EXPECT_EQ(encode(result.message), std::vector<char>(frame.data, frame.data + frame.size))
            << "frame of step " << frame.step << " does not re-encode to the bytes it was read from";
        if (const auto* run = std::get_if<RunDescription>(&result.message)) out.runs.push_back(*run);
        if (const auto* step = std::get_if<StepRecord>(&result.message)) out.steps.push_back(*step);
        if (const auto* event = std::get_if<Event>(&result.message)) out.events.push_back(*event);
      },
      &errors);
  EXPECT_TRUE(errors.empty()) << errors.front();
  return out;
}

TEST(OldRecording, OpensAndDecodesFieldForField) {
  const Decoded run = read_fixture();
  ASSERT_FALSE(run.runs.empty());
  const RunDescription& description = run.runs.front();
  EXPECT_EQ(description.layers.size(), 18u);
  EXPECT_EQ(description.layers.front().name, "tok.weight");
  EXPECT_EQ(description.device, "cpu");
  ASSERT_TRUE(description.policies_on.has_value());
  ASSERT_EQ(run.steps.size(), 8u);
  for (size_t i = 0; i < run.steps.size(); ++i) {
    const StepRecord& step = run.steps[i];
    EXPECT_EQ(step.step, int64_t(i));
    EXPECT_EQ(step.run, description.run_id);
    EXPECT_EQ(step.layer_count, 18u);
    EXPECT_EQ(step.layer_values.size(), size_t(__builtin_popcount(step.metric_mask)) * 18u);
    ASSERT_TRUE(step.scaler.has_value()) << "step " << i;
    EXPECT_GT(step.scaler->scale, 0);
    EXPECT_EQ(step.skipped, i == 4) << "step " << i;
    EXPECT_EQ(step.cause, i == 4 ? "batch" : "") << "step " << i;
  }
  EXPECT_EQ(run.steps[4].skip_reason, "nonfinite");
  EXPECT_FALSE(run.steps[0].watches.empty());
  bool first_nonfinite = false;
  for (const Event& event : run.events) {
    if (event.kind != "first_nonfinite") continue;
    first_nonfinite = true;
    EXPECT_EQ(event.step, 4);
    ASSERT_TRUE(event.cause.has_value());
    EXPECT_EQ(event.cause->kind, "batch");
    EXPECT_NE(event.cause->sentence.find("Batch at step 4"), std::string::npos) << event.cause->sentence;
  }
  EXPECT_TRUE(first_nonfinite);
}

}  // namespace
}  // namespace keel::wire
