#include "text/table_format.hpp"
#include "keel/wire/vocabulary.hpp"

#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test_publisher.hpp"

namespace keel::app {
namespace {

using test_support::sample_run;
using test_support::sample_step;
namespace wire = keel::wire;

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

size_t count_of(const std::string& text, const std::string& part) {
  size_t count = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) {
    ++count;
  }
  return count;
}

TEST(TableFormat, ValuesPrintNonFiniteAsWords) {
  EXPECT_EQ(format_value(std::numeric_limits<double>::quiet_NaN(), 4), "nan");
  EXPECT_EQ(format_value(-std::numeric_limits<double>::quiet_NaN(), 4), "nan");
  EXPECT_EQ(format_value(std::numeric_limits<double>::infinity(), 4), "inf");
  EXPECT_EQ(format_value(-std::numeric_limits<double>::infinity(), 4), "-inf");
  EXPECT_EQ(format_value(1.23456, 3), "1.23");
}

TEST(TableFormat, WorstLayerIsTheLargestGradNorm) {
  const std::optional<WorstLayer> worst = worst_layer(sample_step(1));
  ASSERT_TRUE(worst);
  EXPECT_EQ(worst->index, 0u);
  EXPECT_EQ(worst->grad_norm, 1.0f);
}

TEST(TableFormat, WorstLayerIsTheFirstNonFiniteOne) {
  wire::StepRecord step = sample_step(1);
  step.layer_values[1] = kNan;
  const std::optional<WorstLayer> worst = worst_layer(step);
  ASSERT_TRUE(worst);
  EXPECT_EQ(worst->index, 1u);
}

TEST(TableFormat, NoWorstLayerWithoutGradNorm) {
  wire::StepRecord step = sample_step(1);
  step.metric_mask = 1u << static_cast<int>(wire::LayerMetric::kParamNorm);
  step.layer_values = {3.0f, 2.0f};
  EXPECT_FALSE(worst_layer(step));
  EXPECT_TRUE(contains(format_step(step, LayerNames{}), "  -"));
}

TEST(TableFormat, ARollupStepNamesItsWorstModule) {
  wire::RunDescription run = sample_run();
  run.modules = {{"blocks.0", 0, 1}, {"blocks.1", 1, 1}};
  LayerNames names;
  names.learn(run);
  wire::StepRecord step = sample_step(1);
  step.metric_mask = 0;
  step.layer_values.clear();
  step.module_mask = 1u << static_cast<int>(wire::LayerMetric::kGradNorm);
  step.module_count = 2;
  step.module_values = {0.5f, 7.0f};
  EXPECT_FALSE(worst_layer(step));
  EXPECT_TRUE(contains(format_step(step, names), "module blocks.1 (7)")) << format_step(step, names);
  step.module_values = {kNan, 7.0f};
  EXPECT_TRUE(contains(format_step(step, names), "module blocks.0 (nan)"));
}

TEST(TableFormat, StepRowShowsTheColumnsAndNamesTheWorstLayer) {
  LayerNames names;
  names.learn(sample_run());
  wire::StepRecord step = sample_step(1234);
  step.loss = std::numeric_limits<double>::quiet_NaN();
  step.skipped = true;
  step.skip_reason = "nonfinite";
  step.dropped = 5;
  step.layer_values[1] = kNan;
  const std::string row = format_step(step, names);
  EXPECT_EQ(row.find('\n'), std::string::npos);
  EXPECT_TRUE(contains(row, "1234"));
  EXPECT_TRUE(contains(row, " nan "));
  EXPECT_TRUE(contains(row, "1.25"));
  EXPECT_TRUE(contains(row, "SKIPPED nonfinite"));
  EXPECT_TRUE(contains(row, " 420 "));
  EXPECT_TRUE(contains(row, " 5 "));
  EXPECT_TRUE(contains(row, "fc1.bias (nan)"));

  const std::string header = step_table_header();
  for (const char* column : {"step", "rank", "loss", "grad_norm", "update", "probe_us",
                             "dropped", "worst layer"}) {
    EXPECT_TRUE(contains(header, column)) << column;
  }
  // Columns line up: the loss column ends where its header ends.
  EXPECT_EQ(header.find("loss") + 4, row.find(" nan ") + 4);
}

TEST(TableFormat, RunHeaderListsTheLayers) {
  const std::string text = format_run(sample_run());
  EXPECT_TRUE(contains(text, "run demo-run"));
  EXPECT_TRUE(contains(text, "rank 0 of 2"));
  EXPECT_TRUE(contains(text, "torch 1.13.1"));
  EXPECT_TRUE(contains(text, "fc1.weight"));
  EXPECT_TRUE(contains(text, "[16, 8]"));
  EXPECT_TRUE(contains(text, "128"));
  EXPECT_TRUE(contains(text, "fc1.bias"));
  EXPECT_TRUE(contains(text, "watches: logits"));
  EXPECT_FALSE(contains(text, "sharded"));
  wire::RunDescription sharded = sample_run();
  sharded.sharded = true;
  EXPECT_TRUE(contains(format_run(sharded), "rank 0 of 2, sharded"));
}

// `keel-cli tail` of a rewound run: the event says from, to and why; the command its target.
TEST(TableFormat, ARewindReadsFromToAndWhy) {
  wire::Event event;
  event.step = 199;
  event.kind = wire::event_kind::kRewind;
  event.detail = "rewound from step 199 to step 100 (a command): weights, buffers, optimizer state put back in 1.7 ms";
  const std::string line = format_event(event);
  EXPECT_EQ(line.find("event rewind"), 0u) << line;
  EXPECT_TRUE(contains(line, "step 199")) << line;
  EXPECT_TRUE(contains(line, "rewound from step 199 to step 100 (a command)")) << line;
  event.kind = wire::event_kind::kRewindStopped;
  event.detail = "diverged again (loss above 2x its median for 10 steps) after 3 rewinds (rewind_max)";
  EXPECT_TRUE(contains(format_event(event), "event rewind_stopped")) << format_event(event);
  EXPECT_TRUE(contains(format_event(event), "after 3 rewinds (rewind_max)")) << format_event(event);

  wire::Command command;
  command.kind = wire::command_kind::kRewind;
  EXPECT_TRUE(contains(format_command(command), "to the newest snapshot")) << format_command(command);
  command.to_step = 6000;
  command.at_step = 6120;
  EXPECT_TRUE(contains(format_command(command), "to_step 6000  at_step 6120")) << format_command(command);
}

// `keel-cli tail` of a forecaster's warning: the event's sentence, then its numbers on a line of
// their own as a cause's, and the advice when the sentence does not carry it.
TEST(TableFormat, AWarningPrintsItsNumbersOnALineOfItsOwn) {
  wire::Event event;
  event.step = 120;
  event.kind = wire::event_kind::kWarning;
  event.layer = "blocks.0.attn.qkv.weight";
  event.detail = "update ratio / lr of blocks.0.attn.qkv.weight 2.6x its baseline 0.031 and rising 4% a step";
  event.warning = wire::Warning{"update_ratio", 0.0806, 0.031, 0.04, 35, "lower the learning rate"};
  const std::string text = format_event(event);
  EXPECT_EQ(text.find("event warning"), 0u) << text;
  EXPECT_TRUE(contains(text, "layer blocks.0.attn.qkv.weight  update ratio / lr of")) << text;
  EXPECT_TRUE(contains(text, "\n      warning update_ratio 0.0806, 2.6x its baseline 0.031, rising 4.08% a step; may "
                             "diverge in ~35 steps; lower the learning rate"))
      << text;
  event.detail += "; lower the learning rate";
  EXPECT_EQ(count_of(format_event(event), "lower the learning rate"), 1u) << "the advice said once";
  event.warning.reset();
  EXPECT_FALSE(contains(format_event(event), "\n")) << "no map, no second line";
}

TEST(TableFormat, EventCommandAndAckAreOneLineEach) {
  wire::Event event;
  event.step = 88;
  event.kind = "first_nonfinite";
  event.layer = "fc1.weight";
  event.detail = "3 NaN";
  const std::string event_line = format_event(event);
  EXPECT_TRUE(contains(event_line, "first_nonfinite"));
  EXPECT_TRUE(contains(event_line, "step 88"));
  EXPECT_TRUE(contains(event_line, "layer fc1.weight"));
  EXPECT_TRUE(contains(event_line, "3 NaN"));
  EXPECT_FALSE(contains(event_line, "cause")) << "an event without a cause has no cause line";
  event.cause = wire::Cause{"forward", "aten::log", "blocks.2.route", "log of a value that underflowed to 0",
                            "Inf born in the forward pass: aten::log in blocks.2.route at step 88"};
  EXPECT_TRUE(contains(format_event(event), "\n      cause forward: Inf born in the forward pass: aten::log in "
                                            "blocks.2.route at step 88"))
      << format_event(event);

  wire::Command command;
  command.kind = "dump";
  command.id = 9;
  command.label = "why";
  EXPECT_TRUE(contains(format_command(command), "dump"));
  EXPECT_TRUE(contains(format_command(command), "id 9"));
  EXPECT_TRUE(contains(format_command(command), "label why"));

  wire::Ack ack;
  ack.id = 9;
  ack.ok = false;
  ack.error = "disk full";
  EXPECT_TRUE(contains(format_ack(ack), "refused"));
  EXPECT_TRUE(contains(format_ack(ack), "disk full"));
}

// The dump's path is what the user copies next: the ack and the dump event print it whole,
// however long, and a skip's ack says how many updates it covers.
TEST(TableFormat, ADumpPathIsPrintedInFullAndASkipAckHasItsCount) {
  const std::string path = "/scratch/" + std::string(200, 'x') + "/keel-dumps/step-200-nonfinite-blocks.1.mlp";
  wire::Ack ack;
  ack.ok = true;
  ack.step = 200;
  ack.path = path;
  ack.bytes = 4494787;
  EXPECT_TRUE(contains(format_ack(ack), "path " + path + "  bytes 4494787")) << format_ack(ack);
  wire::Event event;
  event.kind = "dump";
  event.step = 200;
  event.detail = "wrote " + path + " (4494787 bytes, 0.01 s)";
  EXPECT_TRUE(contains(format_event(event), event.detail)) << format_event(event);

  wire::Ack skip;
  skip.ok = true;
  skip.step = 40;
  skip.count = 2;
  EXPECT_TRUE(contains(format_ack(skip), "step 40  count 2")) << format_ack(skip);
}

TEST(TableFormat, NetworkTextCannotEmitTerminalEscapes) {
  wire::Event event;
  event.kind = "x";
  event.detail = "\x1b[2Jcleared";
  EXPECT_FALSE(contains(format_event(event), "\x1b"));
  EXPECT_TRUE(contains(format_event(event), "?[2Jcleared"));
}

TEST(TableFormat, PrinterRepeatsTheHeaderAfterEachRunDescription) {
  TablePrinter printer;
  LayerNames names;
  std::string text = printer.format(sample_step(1), names);
  text += printer.format(sample_step(2), names);
  EXPECT_EQ(count_of(text, "worst layer"), 1u);
  text += printer.format(sample_run(), names);
  text += printer.format(sample_step(3), names);
  EXPECT_EQ(count_of(text, "worst layer"), 2u);
  EXPECT_EQ(text.back(), '\n');
}

// `keel-cli tail` prints many step rows a second: a header printed once scrolled away within a
// second. Like vmstat's, it comes back before the first step row once a screenful of lines
// (events among them, a cause taking a line of its own) followed it.
TEST(TableFormat, PrinterRepeatsTheHeaderEveryScreenfulOfLines) {
  TablePrinter printer(4);
  LayerNames names;
  std::string text;
  for (int64_t i = 0; i < 10; ++i) text += printer.format(sample_step(i), names);
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 14u) << text;
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(contains(lines[i], "worst layer"), i % 4 == 0) << "line " << i << ":\n" << text;
  }

  TablePrinter with_events(4);
  wire::Event event;
  event.kind = "first_nonfinite";
  event.cause = wire::Cause{};
  event.cause->kind = "forward";
  text = with_events.format(sample_step(0), names);   // header and a row: 2 lines
  text += with_events.format(event, names);           // 2 more
  EXPECT_EQ(count_of(text, "worst layer"), 1u);
  text += with_events.format(sample_step(1), names);
  EXPECT_EQ(count_of(text, "worst layer"), 2u) << text;

  TablePrinter once;   // 0: only after a new description
  text.clear();
  for (int64_t i = 0; i < 100; ++i) text += once.format(sample_step(i), names);
  EXPECT_EQ(count_of(text, "worst layer"), 1u);
}

// `keel-cli tail` met the probe's re-sent description every 2 s, and reprinted the whole
// layer table each time: over half of its output. Unchanged, it is printed once per run.
TEST(TableFormat, ADescriptionReSentUnchangedIsPrintedOnce) {
  TablePrinter printer;
  LayerNames names;
  wire::RunDescription run = sample_run();
  EXPECT_NE(printer.format(run, names), "");
  run.seq += 40;   // the periodic re-send
  EXPECT_EQ(printer.format(run, names), "");
  wire::RunDescription other_rank = run;
  other_rank.rank = 1;
  EXPECT_NE(printer.format(other_rank, names), "") << "another rank's is its own";
  run.layers.push_back({"temperature", {1}, 1, "float32"});
  EXPECT_NE(printer.format(run, names).find("temperature"), std::string::npos) << "a changed one is printed";
}

// Two probes of one process, both rank 0, re-send their descriptions in turn: each is printed
// once, not every time the other's came in between; each step row names its own run's layer.
TEST(TableFormat, TwoRunsOnOneRankArePrintedOnceEachAndKeepTheirNames) {
  TablePrinter printer;
  LayerNames names;
  wire::RunDescription generator = sample_run();
  generator.model = "generator";
  generator.layers = {{"gen.weight", {4}, 4, "float32"}, {"gen.bias", {4}, 4, "float32"}};
  wire::RunDescription critic = generator;
  critic.model = "critic";
  critic.layers = {{"critic.weight", {4}, 4, "float32"}, {"critic.bias", {4}, 4, "float32"}};
  for (const wire::RunDescription* run : {&generator, &critic}) {
    names.learn(*run);
    const std::string text = printer.format(*run, names);
    EXPECT_TRUE(contains(text, "model " + run->model)) << text;
  }
  for (const wire::RunDescription* run : {&generator, &critic}) {
    names.learn(*run);
    EXPECT_EQ(printer.format(*run, names), "") << run->model << " re-sent unchanged";
  }
  wire::StepRecord step = sample_step(5);   // layer 0 has the largest grad_norm
  step.run = generator.run_id;
  step.model = "generator";
  EXPECT_TRUE(contains(printer.format(step, names), "gen.weight (1)"));
  step.model = "critic";
  EXPECT_TRUE(contains(printer.format(step, names), "critic.weight (1)"));
}

}  // namespace
}  // namespace keel::app
