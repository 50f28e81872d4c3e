// keel-cli's readers of a run kept on disk: `summary` tells the run in ten lines, `export`
// writes tidy CSV that a spreadsheet or pandas reads (every layer's metrics, NaN as nan, a
// regular expression to pick layers, the events with their cause), and both read a dump's
// telemetry.msgpack as well as a recording. The recordings are written with the format's own
// writer from real wire messages.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "cli/export_command.hpp"
#include "cli/summary_command.hpp"
#include "keel/wire/vocabulary.hpp"
#include "keel/wire/codec.hpp"
#include "keel/wire/recording_writer.hpp"

namespace keel::app {
namespace {

namespace fs = std::filesystem;
using wire::recording::FrameKind;

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("keel-cli-recording-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path path = dir / name;
  fs::remove(path);
  return path;
}

wire::RunDescription run() {
  wire::RunDescription r;
  r.run_id = "night-run";
  r.device = "cpu";
  r.torch_version = "2.11.0";
  r.keel_version = "0.1.0";
  r.start_unix_ms = 1764039600000;   // 2025-11-25 03:00:00 UTC
  r.layers = {{"blocks.0.attn.qkv.weight", {4, 4}, 16, "float32"},
              {"blocks.0.mlp.fc.weight", {4, 4}, 16, "float32"},
              {"head, \"final\".bias", {4}, 4, "float32"}};
  return r;
}

// Steps 0..9: layer 1 is loudest at step 7, step 5 is non-finite (skipped) in layer 0.
std::vector<wire::Message> messages() {
  std::vector<wire::Message> out = {run()};
  for (int64_t s = 0; s < 10; ++s) {
    wire::StepRecord r;
    r.run = "night-run";
    r.step = s;
    r.loss = 3.0 - 0.1 * static_cast<double>(s);
    r.lr = 1e-3;
    r.grad_norm = 1.0;
    r.stamp_unix_ns = 1764039600000000000 + s * 1000000000;
    r.layer_count = 3;
    r.metric_mask = wire::kAllLayerMetrics;
    r.layer_values.assign(3 * wire::kLayerMetricCount, 0.5f);
    const int grad_norm = r.metric_block(wire::LayerMetric::kGradNorm);
    r.layer_values[grad_norm * 3 + 1] = s == 7 ? 42.0f : 1.0f;
    if (s == 5) {
      r.layer_values[grad_norm * 3 + 0] = std::numeric_limits<float>::quiet_NaN();
      r.skipped = true;
      r.skip_reason = "nonfinite";
      r.cause = "forward";
      wire::Event e;
      e.run = "night-run";
      e.step = 5;
      e.kind = "first_nonfinite";
      e.layer = "blocks.0.attn.qkv.weight";
      e.detail = "non-finite gradient values, in 1 layer";
      e.cause = wire::Cause{"forward", "aten::matmul", "blocks.0.attn.qkv", "overflow",
                            "Inf born in the forward pass: aten::matmul in blocks.0.attn.qkv at step 5"};
      out.push_back(r);
      out.push_back(e);
      continue;
    }
    out.push_back(r);
  }
  return out;
}

fs::path write_recording(const std::string& name, const std::vector<wire::Message>& recorded = messages()) {
  const fs::path path = scratch(name);
  std::string error;
  auto writer = wire::RecordingWriter::create(path.string(), {}, error);
  EXPECT_TRUE(writer) << error;
  int64_t step = -1;
  for (const wire::Message& m : recorded) {
    FrameKind kind = FrameKind::run;
    if (const auto* r = std::get_if<wire::StepRecord>(&m)) {
      kind = FrameKind::step;
      step = r->step;
    } else if (std::holds_alternative<wire::Event>(m)) {
      kind = FrameKind::event;
    }
    const std::vector<char> payload = wire::encode(m);
    EXPECT_TRUE(writer->append(kind, step, payload.data(), payload.size()));
  }
  EXPECT_TRUE(writer->close());
  return path;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(RecordingCli, SummaryTellsTheRunInTenLines) {
  const fs::path path = write_recording("summary.keelrec");
  std::ostringstream out, err;
  ASSERT_EQ(run_summary(path.string(), out, err), 0) << err.str();
  const std::vector<std::string> lines = lines_of(out.str());
  ASSERT_EQ(lines.size(), 10u) << out.str();
  EXPECT_NE(lines[0].find("night-run"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("3 layers"), std::string::npos) << lines[0];
  EXPECT_NE(lines[2].find("0 to 9: 10 recorded"), std::string::npos) << lines[2];
  EXPECT_NE(lines[3].find("started 2025-11-25 03:00:00 UTC"), std::string::npos) << lines[3];
  EXPECT_NE(lines[3].find("0m09s"), std::string::npos) << lines[3];
  EXPECT_NE(lines[4].find("1 (nonfinite 1)"), std::string::npos) << lines[4];
  EXPECT_NE(lines[5].find("step 5 in blocks.0.attn.qkv.weight"), std::string::npos) << lines[5];
  EXPECT_NE(lines[6].find("aten::matmul in blocks.0.attn.qkv"), std::string::npos) << lines[6];
  EXPECT_NE(lines[7].find("least 2.1 at step 9"), std::string::npos) << lines[7];
  EXPECT_EQ(lines[8].find("loudest  blocks.0.mlp.fc.weight 42 (step 7)"), 0u) << lines[8];
  EXPECT_NE(lines[9].find("first_nonfinite 1"), std::string::npos) << lines[9];
  EXPECT_EQ(err.str(), "");
}

// A rewound run's summary says each rewind's from, to and why, and each stop's divergence,
// without the paragraphs after them (what was put back, what usually cures a divergence).
TEST(RecordingCli, SummaryListsEachRewindWithFromToAndWhy) {
  std::vector<wire::Message> recorded = messages();
  wire::Event rewind;
  rewind.run = "night-run";
  rewind.step = 9;
  rewind.kind = wire::event_kind::kRewind;
  rewind.detail = "rewound from step 9 to step 4 (a command): weights, buffers, optimizer state put back in 1.7 ms; "
                  "the batches of steps 4..9 were consumed and are not replayed unless the trainer's on_rewind "
                  "repositions its data";
  wire::Event stopped;
  stopped.run = "night-run";
  stopped.step = 12;
  stopped.kind = wire::event_kind::kRewindStopped;
  stopped.detail = "diverged again (loss 9.1 above 2x its median 2.2 for 10 steps) after 3 rewinds (rewind_max): "
                   "not rewinding, training goes on; what usually cures a run that keeps diverging: a lower lr";
  recorded.push_back(rewind);
  recorded.push_back(stopped);
  const fs::path path = write_recording("rewound.keelrec", recorded);
  std::ostringstream out, err;
  ASSERT_EQ(run_summary(path.string(), out, err), 0) << err.str();
  const std::vector<std::string> lines = lines_of(out.str());
  ASSERT_EQ(lines.size(), 12u) << out.str();
  EXPECT_NE(lines[9].find("rewind 1"), std::string::npos) << lines[9];
  EXPECT_EQ(lines[10], "rewind   step 9: rewound from step 9 to step 4 (a command)");
  EXPECT_EQ(lines[11], "rewind   step 12: not rewound, diverged again (loss 9.1 above 2x its median 2.2 for 10 steps) "
                       "after 3 rewinds (rewind_max): not rewinding, training goes on");
}

// A run the forecaster warned about: each warning's step, layer and numbers, a line each, the
// first eight, then how many more.
TEST(RecordingCli, SummaryListsEachWarningWithItsNumbers) {
  std::vector<wire::Message> recorded = messages();
  for (int i = 0; i < 10; ++i) {
    wire::Event warning;
    warning.run = "night-run";
    warning.seq = 100 + uint64_t(i);
    warning.step = 8;
    warning.kind = wire::event_kind::kWarning;
    warning.layer = i == 0 ? "blocks.0.mlp.fc.weight" : "";
    warning.detail = "the global grad norm 3.1x its baseline; lower the learning rate";
    warning.warning = wire::Warning{i == 0 ? "update_ratio" : "grad_norm", 0.0806, 0.031, 0.04, -1,
                                    "lower the learning rate"};
    recorded.push_back(warning);
  }
  const fs::path path = write_recording("warned.keelrec", recorded);
  std::ostringstream out, err;
  ASSERT_EQ(run_summary(path.string(), out, err), 0) << err.str();
  const std::vector<std::string> lines = lines_of(out.str());
  ASSERT_EQ(lines.size(), 19u) << out.str();
  EXPECT_NE(lines[9].find("warning 10"), std::string::npos) << lines[9];
  EXPECT_EQ(lines[10], "warning  step 8: blocks.0.mlp.fc.weight: update_ratio 0.0806, 2.6x its baseline 0.031, "
                       "rising 4.08% a step; no estimate of when");
  EXPECT_EQ(lines[11].find("warning  step 8: grad_norm 0.0806"), 0u) << lines[11];
  EXPECT_EQ(lines[18], "warning  and 2 more");
}

TEST(RecordingCli, ExportWritesTidyCsvWithEveryMetricAndNanAsNan) {
  const fs::path path = write_recording("export.keelrec");
  std::ostringstream out, err;
  ASSERT_EQ(run_export({path.string(), "", false}, out, err), 0) << err.str();
  const std::vector<std::string> lines = lines_of(out.str());
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines[0], "step,layer,metric,value");
  // Per step: loss, lr, grad_norm, probe_us, and 3 layers x 6 metrics.
  EXPECT_EQ(lines.size(), 1u + 10u * (4u + 3u * wire::kLayerMetricCount));
  const std::string csv = out.str();
  EXPECT_NE(csv.find("\n5,blocks.0.attn.qkv.weight,grad_norm,nan\n"), std::string::npos);
  EXPECT_NE(csv.find("\n7,blocks.0.mlp.fc.weight,grad_norm,42\n"), std::string::npos);
  EXPECT_NE(csv.find("\n0,,loss,3\n"), std::string::npos);
  // A name with a comma and quotes is one quoted field.
  EXPECT_NE(csv.find("\n0,\"head, \"\"final\"\".bias\",grad_norm,0.5\n"), std::string::npos);
}

// A wide model's run: step 0 per layer, step 1 a rollup (module values, no layer values).
std::vector<wire::Message> rollup_messages() {
  wire::RunDescription description = run();
  description.modules = {{"blocks.0.attn", 0, 1}, {"blocks.0.mlp", 1, 1}};
  std::vector<wire::Message> out = {description};
  for (int64_t s = 0; s < 2; ++s) {
    wire::StepRecord r;
    r.run = "night-run";
    r.step = s;
    r.loss = 2.0;
    r.layer_count = 3;
    if (s == 0) {
      r.metric_mask = wire::kAllLayerMetrics;
      r.layer_values.assign(3 * wire::kLayerMetricCount, 0.5f);
    } else {
      r.metric_mask = 0;
      r.module_mask = wire::kAllLayerMetrics;
      r.module_count = 2;
      r.module_values.assign(2 * wire::kLayerMetricCount, 0.25f);
      r.module_values[size_t(r.module_block(wire::LayerMetric::kGradNorm)) * 2 + 1] = 9.0f;
    }
    out.push_back(r);
  }
  return out;
}

TEST(RecordingCli, ARollupStepExportsItsModulesUnderTheirNames) {
  const fs::path path = write_recording("rollup.keelrec", rollup_messages());
  std::ostringstream out, err;
  ASSERT_EQ(run_export({path.string(), "", false}, out, err), 0) << err.str();
  const std::vector<std::string> lines = lines_of(out.str());
  // Step 0: 4 run series and 3 layers x 6 metrics; step 1: 4 run series and 2 modules x 6.
  EXPECT_EQ(lines.size(), 1u + (4u + 3u * wire::kLayerMetricCount) + (4u + 2u * wire::kLayerMetricCount));
  const std::string csv = out.str();
  EXPECT_NE(csv.find("\n1,blocks.0.mlp,module.grad_norm,9\n"), std::string::npos) << csv;
  EXPECT_NE(csv.find("\n1,blocks.0.attn,module.grad_norm,0.25\n"), std::string::npos);
  EXPECT_EQ(csv.find("\n1,blocks.0.mlp.fc.weight,"), std::string::npos) << "no layer rows on a rollup step";
  std::ostringstream picked, picked_err;
  ASSERT_EQ(run_export({path.string(), "mlp", false}, picked, picked_err), 0);
  EXPECT_NE(picked.str().find("\n1,blocks.0.mlp,module.grad_norm,9\n"), std::string::npos);
  EXPECT_EQ(picked.str().find("blocks.0.attn"), std::string::npos);
  std::ostringstream summary, summary_err;
  EXPECT_EQ(run_summary(path.string(), summary, summary_err), 0) << summary_err.str();
}

TEST(RecordingCli, ExportPicksLayersByRegularExpressionAndWritesEventsWithTheirCause) {
  const fs::path path = write_recording("pick.keelrec");
  std::ostringstream out, err;
  ASSERT_EQ(run_export({path.string(), "mlp|attn", false}, out, err), 0) << err.str();
  const std::vector<std::string> lines = lines_of(out.str());
  EXPECT_EQ(lines.size(), 1u + 10u * 2u * wire::kLayerMetricCount);
  EXPECT_EQ(out.str().find(",loss,"), std::string::npos);
  EXPECT_EQ(out.str().find("head"), std::string::npos);

  std::ostringstream events, events_err;
  ASSERT_EQ(run_export({path.string(), "", true}, events, events_err), 0);
  const std::vector<std::string> rows = lines_of(events.str());
  ASSERT_EQ(rows.size(), 2u) << events.str();
  EXPECT_EQ(rows[0], "step,rank,kind,layer,detail,cause_kind,cause_op,cause_module,cause");
  EXPECT_EQ(rows[1],
            "5,0,first_nonfinite,blocks.0.attn.qkv.weight,\"non-finite gradient values, in 1 layer\",forward,"
            "aten::matmul,blocks.0.attn.qkv,Inf born in the forward pass: aten::matmul in blocks.0.attn.qkv at step 5");

  std::ostringstream bad_out, bad_err;
  EXPECT_EQ(run_export({path.string(), "([", false}, bad_out, bad_err), 1);
  EXPECT_NE(bad_err.str().find("not a regular expression"), std::string::npos) << bad_err.str();
}

TEST(RecordingCli, ADumpsTelemetryReadsWithItsRunDescription) {
  const fs::path dir = scratch("step-5-nonfinite");
  fs::create_directories(dir);
  std::vector<wire::Message> all = messages();
  {
    std::ofstream run_file(dir / "run.msgpack", std::ios::binary);
    const std::vector<char> payload = wire::encode(all[0]);
    run_file.write(payload.data(), static_cast<std::streamsize>(payload.size()));
    std::ofstream telemetry(dir / "telemetry.msgpack", std::ios::binary);
    for (size_t i = 1; i < all.size(); ++i) {
      if (!std::holds_alternative<wire::StepRecord>(all[i])) continue;
      const std::vector<char> p = wire::encode(all[i]);
      telemetry.write(p.data(), static_cast<std::streamsize>(p.size()));
    }
  }
  std::ostringstream out, err;
  ASSERT_EQ(run_summary((dir / "telemetry.msgpack").string(), out, err), 0) << err.str();
  const std::vector<std::string> lines = lines_of(out.str());
  ASSERT_EQ(lines.size(), 10u);
  EXPECT_NE(lines[0].find("night-run"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("dump telemetry"), std::string::npos) << lines[1];
  EXPECT_NE(lines[2].find("10 recorded"), std::string::npos) << lines[2];
  EXPECT_EQ(lines[8].find("loudest  blocks.0.mlp.fc.weight 42"), 0u) << lines[8];
}

// A recording is a file from anywhere: an escape sequence in a name must not reach the
// terminal as one.
TEST(RecordingCli, SummaryPrintsNoControlCharacterFromTheFile) {
  const fs::path path = scratch("escape.keelrec");
  std::string error;
  auto writer = wire::RecordingWriter::create(path.string(), {}, error);
  ASSERT_TRUE(writer) << error;
  wire::RunDescription r = run();
  r.run_id = "night\x1b]2;owned\x07-run";
  const std::vector<char> payload = wire::encode(r);
  ASSERT_TRUE(writer->append(FrameKind::run, 0, payload.data(), payload.size()));
  ASSERT_TRUE(writer->close());
  std::ostringstream out, err;
  ASSERT_EQ(run_summary(path.string(), out, err), 0) << err.str();
  EXPECT_NE(out.str().find("night?]2;owned?-run"), std::string::npos) << out.str();
  for (char c : out.str()) EXPECT_TRUE(c == '\n' || static_cast<unsigned char>(c) >= 0x20) << int(c);
}

TEST(RecordingCli, AFileThatIsNeitherIsRefusedInWords) {
  const fs::path path = scratch("notes.txt");
  { std::ofstream(path) << "these are not the bytes you are looking for"; }
  std::ostringstream out, err;
  EXPECT_EQ(run_summary(path.string(), out, err), 1);
  EXPECT_NE(err.str().find("neither a keel recording nor a dump's telemetry"), std::string::npos) << err.str();
  std::ostringstream missing_out, missing_err;
  EXPECT_EQ(run_export({"/nonexistent.keelrec", "", false}, missing_out, missing_err), 1);
  EXPECT_NE(missing_err.str().find("/nonexistent.keelrec"), std::string::npos) << missing_err.str();
}

}  // namespace
}  // namespace keel::app
