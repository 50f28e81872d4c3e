#include "text/json_format.hpp"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "keel/wire/vocabulary.hpp"
#include "test_publisher.hpp"

namespace keel::app {
namespace {

using Json = nlohmann::ordered_json;
using test_support::sample_run;
using test_support::sample_step;
namespace wire = keel::wire;

std::vector<std::string> keys_of(const Json& object) {
  std::vector<std::string> keys;
  for (auto it = object.begin(); it != object.end(); ++it) keys.push_back(it.key());
  return keys;
}

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(JsonFormat, RunDescriptionHasEveryField) {
  const Json json = to_json(sample_run(), LayerNames{});
  EXPECT_EQ(keys_of(json),
            (std::vector<std::string>{"type", "rank", "seq", "run_id", "model", "world_size", "layers",
                                      "watches", "buffers", "keel_version", "torch_version", "device",
                                      "start_unix_ms", "policies_on", "recording", "modules", "sharded",
                                      "run"}));
  EXPECT_EQ(json["run_id"], "demo-run");
  EXPECT_EQ(json["type"], "run");
  EXPECT_EQ(json["run"], "demo-run") << "the alias every other line is keyed by";
  EXPECT_EQ(json["model"], "");
  EXPECT_EQ(json["rank"], 0);
  EXPECT_EQ(json["world_size"], 2);
  EXPECT_EQ(json["seq"], 1);
  ASSERT_EQ(json["layers"].size(), 2u);
  EXPECT_EQ(keys_of(json["layers"][0]),
            (std::vector<std::string>{"name", "shape", "numel", "dtype", "aliases"}));
  EXPECT_EQ(json["layers"][0]["name"], "fc1.weight");
  EXPECT_EQ(json["layers"][0]["shape"], Json::array({16, 8}));
  EXPECT_EQ(json["layers"][0]["numel"], 128);
  EXPECT_EQ(json["layers"][0]["dtype"], "float32");
  EXPECT_EQ(json["watches"], Json::array({"logits"}));
  EXPECT_EQ(json["device"], "cpu");
  EXPECT_EQ(json["keel_version"], "0.1.0");
  EXPECT_EQ(json["torch_version"], "1.13.1");
}

TEST(JsonFormat, AShardedRunSaysSo) {
  wire::RunDescription run = sample_run();
  EXPECT_EQ(to_json(run, LayerNames{})["sharded"], false);
  run.sharded = true;
  EXPECT_EQ(to_json(run, LayerNames{})["sharded"], true);
}

TEST(JsonFormat, EachParamGroupsLrIsPrintedWhenThereAreSeveral) {
  wire::StepRecord step = sample_step(7);
  EXPECT_EQ(to_json(step, LayerNames{})["group_lrs"], Json::array());
  step.group_lrs = {1e-3, 1e-4};
  EXPECT_EQ(to_json(step, LayerNames{})["group_lrs"], Json::array({1e-3, 1e-4}));
}

TEST(JsonFormat, ALayerWithNoGradientSaysWhy) {
  wire::StepRecord step = sample_step(7);
  EXPECT_FALSE(to_json(step, LayerNames{})["layers"][0].contains("no_gradient"));
  step.frozen_layers = {0};
  step.unused_layers = {1};
  const Json json = to_json(step, LayerNames{});
  EXPECT_EQ(json["layers"][0]["no_gradient"], "frozen");
  EXPECT_EQ(json["layers"][1]["no_gradient"], "unused");
}

TEST(JsonFormat, ALayersAliasesArePrintedWhenItHasThem) {
  wire::RunDescription run = sample_run();
  run.layers[1].aliases = {"head.weight"};
  const Json json = to_json(run, LayerNames{});
  EXPECT_EQ(keys_of(json["layers"][1]), (std::vector<std::string>{"name", "shape", "numel", "dtype", "aliases"}));
  EXPECT_EQ(json["layers"][1]["aliases"], Json::array({"head.weight"}));
  EXPECT_EQ(json["layers"][0]["aliases"], Json::array());
}

TEST(JsonFormat, StepHasEveryFieldAndLayerNamesFromTheDescription) {
  LayerNames names;
  names.learn(sample_run());
  wire::StepRecord step = sample_step(7);
  step.skipped = true;
  step.skip_reason = "nonfinite";
  step.dropped = 3;
  step.probe_errors = 2;
  step.watches = {{"logits", 12.5f, 3.0f, 4.25f, 0}};
  const Json json = to_json(step, names);
  EXPECT_EQ(keys_of(json),
            (std::vector<std::string>{"type", "rank", "seq", "run", "model", "step", "loss", "lr",
                                      "grad_norm", "skipped", "skip_reason", "step_time_us",
                                      "probe_us", "dropped", "probe_errors", "record_dropped",
                                      "snapshot_bytes", "stamp_unix_ns", "metric_mask", "layer_count", "layers",
                                      "module_mask", "module_count", "module_values", "scaler",
                                      "watches", "buffer_absmax", "frozen", "unused", "group_lrs",
                                      "cause"}));
  EXPECT_EQ(json["type"], "step");
  EXPECT_EQ(json["step"], 7);
  EXPECT_EQ(json["run"], "") << "a probe older than the key names no run";
  EXPECT_EQ(json["model"], "");
  EXPECT_EQ(json["seq"], 9);
  EXPECT_EQ(json["loss"], 2.5);
  EXPECT_EQ(json["lr"], 1e-3);
  EXPECT_EQ(json["grad_norm"], 1.25);
  EXPECT_EQ(json["skipped"], true);
  EXPECT_EQ(json["skip_reason"], "nonfinite");
  EXPECT_EQ(json["step_time_us"], 78000.0);
  EXPECT_EQ(json["probe_us"], 420.0);
  EXPECT_EQ(json["dropped"], 3);
  EXPECT_EQ(json["probe_errors"], 2);
  EXPECT_EQ(json["stamp_unix_ns"], 1700000000000000000);
  EXPECT_TRUE(json["scaler"].is_null());

  ASSERT_EQ(json["layers"].size(), 2u);
  const Json& layer1 = json["layers"][1];
  EXPECT_EQ(keys_of(layer1),
            (std::vector<std::string>{"name", "grad_norm", "grad_absmax", "grad_nonfinite",
                                      "grad_zero_frac", "param_norm", "update_ratio"}));
  EXPECT_EQ(json["layers"][0]["name"], "fc1.weight");
  EXPECT_EQ(layer1["name"], "fc1.bias");
  EXPECT_EQ(layer1["grad_norm"], 0.75);
  EXPECT_EQ(layer1["grad_absmax"], 0.25);
  EXPECT_EQ(layer1["grad_zero_frac"], 0.125);
  EXPECT_EQ(layer1["param_norm"], 2.0);
  EXPECT_EQ(layer1["update_ratio"], 2e-3);

  ASSERT_EQ(json["watches"].size(), 1u);
  EXPECT_EQ(keys_of(json["watches"][0]),
            (std::vector<std::string>{"name", "absmax", "rms", "z", "nonfinite"}));
  EXPECT_EQ(json["watches"][0]["name"], "logits");
  EXPECT_EQ(json["watches"][0]["absmax"], 12.5);
  EXPECT_EQ(json["watches"][0]["z"], 4.25);
}

TEST(JsonFormat, BuffersAreNamedFromTheirRunsDescription) {
  wire::RunDescription run = sample_run();
  run.buffers = {"bn.running_mean", "bn.running_var"};
  LayerNames names;
  names.learn(run);
  EXPECT_EQ(to_json(run, names)["buffers"], Json::array({"bn.running_mean", "bn.running_var"}));
  wire::StepRecord step = sample_step(7);
  step.buffer_absmax = {0.5f, kInf, 2.0f};
  const Json json = to_json(step, names);
  ASSERT_EQ(json["buffer_absmax"].size(), 3u);
  EXPECT_EQ(json["buffer_absmax"][0], (Json{{"name", "bn.running_mean"}, {"absmax", 0.5}}));
  EXPECT_EQ(json["buffer_absmax"][1], (Json{{"name", "bn.running_var"}, {"absmax", "inf"}}));
  EXPECT_EQ(json["buffer_absmax"][2]["name"], "buffer2") << "more than the description named";
}

TEST(JsonFormat, LayerNamesFallBackWithoutADescriptionOfThatRank) {
  LayerNames names;
  names.learn(sample_run(0));
  const Json other_rank = to_json(sample_step(1, /*rank=*/1), names);
  EXPECT_EQ(other_rank["layers"][0]["name"], "layer0");
  EXPECT_EQ(other_rank["layers"][1]["name"], "layer1");

  // More layers than the description named (a stale description): the extra ones fall back.
  wire::StepRecord wider = sample_step(1);
  wider.layer_count = 3;
  wider.layer_values.assign(3 * wire::kLayerMetricCount, 1.0f);
  const Json json = to_json(wider, names);
  EXPECT_EQ(json["layers"][1]["name"], "fc1.bias");
  EXPECT_EQ(json["layers"][2]["name"], "layer2");
}

// Two probes of one process (a GAN), both rank 0: each record is named by its own run's
// description, whichever came last; a record that names no run takes its rank's last one.
TEST(JsonFormat, LayerNamesAreThoseOfTheRunTheRecordNames) {
  wire::RunDescription generator = sample_run();
  generator.run_id = "gan";
  generator.model = "generator";
  generator.layers = {{"gen.fc.weight", {4}, 4, "float32"}, {"gen.fc.bias", {4}, 4, "float32"}};
  wire::RunDescription critic = generator;
  critic.model = "critic";
  critic.layers = {{"critic.fc.weight", {4}, 4, "float32"}, {"critic.fc.bias", {4}, 4, "float32"}};
  LayerNames names;
  names.learn(generator);
  names.learn(critic);

  wire::StepRecord step = sample_step(3);
  step.run = "gan";
  step.model = "generator";
  Json json = to_json(step, names);
  EXPECT_EQ(json["model"], "generator");
  EXPECT_EQ(json["layers"][1]["name"], "gen.fc.bias");
  step.model = "critic";
  EXPECT_EQ(to_json(step, names)["layers"][1]["name"], "critic.fc.bias");
  step.model = "encoder";   // a run not described yet: no other run's names
  EXPECT_EQ(to_json(step, names)["layers"][1]["name"], "layer1");
  EXPECT_EQ(to_json(sample_step(3), names)["layers"][1]["name"], "critic.fc.bias")
      << "a record that names no run: its rank's last description";
}

TEST(JsonFormat, MetricsAbsentFromTheMaskAreOmitted) {
  wire::StepRecord step = sample_step(1);
  step.metric_mask = (1u << static_cast<int>(wire::LayerMetric::kGradNorm)) |
                     (1u << static_cast<int>(wire::LayerMetric::kGradNonfinite));
  step.layer_values = {1.0f, 0.5f, 0.0f, 4.0f};
  const Json json = to_json(step, LayerNames{});
  for (const Json& layer : json["layers"]) {
    EXPECT_EQ(keys_of(layer), (std::vector<std::string>{"name", "grad_norm", "grad_nonfinite"}));
  }
  EXPECT_EQ(json["layers"][1]["grad_norm"], 0.5);
  EXPECT_EQ(json["layers"][1]["grad_nonfinite"], 4);
}

TEST(JsonFormat, ARollupStepListsItsModulesAndNoLayers) {
  wire::RunDescription run = sample_run();
  run.modules = {{"blocks.0", 0, 2}};
  LayerNames names;
  names.learn(run);
  EXPECT_EQ(to_json(run, names)["modules"][0]["count"], 2);
  wire::StepRecord step = sample_step(1);
  step.metric_mask = 0;
  step.layer_values.clear();
  step.module_mask = (1u << static_cast<int>(wire::LayerMetric::kGradNorm)) |
                     (1u << static_cast<int>(wire::LayerMetric::kGradNonfinite));
  step.module_count = 1;
  step.module_values = {kNan, 3.0f};
  const Json json = to_json(step, names);
  EXPECT_TRUE(json["layers"].empty()) << "no layer has a value at this step";
  ASSERT_EQ(json["module_values"].size(), 1u);
  EXPECT_EQ(keys_of(json["module_values"][0]), (std::vector<std::string>{"name", "grad_norm", "grad_nonfinite"}));
  EXPECT_EQ(json["module_values"][0]["name"], "blocks.0");
  EXPECT_EQ(json["module_values"][0]["grad_norm"], "nan");
  EXPECT_EQ(json["module_values"][0]["grad_nonfinite"], 3);
  EXPECT_EQ(to_json(sample_step(2), names)["module_values"], Json::array()) << "a per-layer step has none";
}

TEST(JsonFormat, NonfiniteCountIsAnInteger) {
  wire::StepRecord step = sample_step(1);
  step.layer_values[2 * 2 + 1] = 4096.0f;  // grad_nonfinite block, layer 1
  const Json json = to_json(step, LayerNames{});
  EXPECT_TRUE(json["layers"][1]["grad_nonfinite"].is_number_integer());
  EXPECT_EQ(json["layers"][1]["grad_nonfinite"], 4096);
  EXPECT_NE(to_json_line(step, LayerNames{}).find("\"grad_nonfinite\":4096,"), std::string::npos);
}

TEST(JsonFormat, NonFiniteNumbersBecomeStrings) {
  wire::StepRecord step = sample_step(1);
  step.loss = std::numeric_limits<double>::quiet_NaN();
  step.grad_norm = std::numeric_limits<double>::infinity();
  step.lr = -std::numeric_limits<double>::infinity();
  step.layer_values[0] = kNan;   // grad_norm, layer 0
  step.layer_values[1] = -kInf;  // grad_norm, layer 1
  step.layer_values[2] = kInf;   // grad_absmax, layer 0
  step.scaler = wire::ScalerState{std::numeric_limits<double>::infinity(), 3, true, 12};
  step.watches = {{"logits", kNan, kInf, -kInf, 5}};
  const Json json = to_json(step, LayerNames{});
  EXPECT_EQ(json["loss"], "nan");
  EXPECT_EQ(json["grad_norm"], "inf");
  EXPECT_EQ(json["lr"], "-inf");
  EXPECT_EQ(json["layers"][0]["grad_norm"], "nan");
  EXPECT_EQ(json["layers"][1]["grad_norm"], "-inf");
  EXPECT_EQ(json["layers"][0]["grad_absmax"], "inf");
  EXPECT_EQ(json["scaler"]["scale"], "inf");
  EXPECT_EQ(json["watches"][0]["absmax"], "nan");
  EXPECT_EQ(json["watches"][0]["rms"], "inf");
  EXPECT_EQ(json["watches"][0]["z"], "-inf");
  EXPECT_EQ(json["watches"][0]["nonfinite"], 5);
  // The line is valid JSON (no bare NaN token) and reads back the same.
  EXPECT_EQ(Json::parse(to_json_line(step, LayerNames{})), json);
}

TEST(JsonFormat, ScalerStateIsAnObjectWhenPresent) {
  wire::StepRecord step = sample_step(1);
  step.scaler = wire::ScalerState{65536.0, 17, false, 2};
  const Json json = to_json(step, LayerNames{});
  EXPECT_EQ(keys_of(json["scaler"]),
            (std::vector<std::string>{"scale", "growth_tracker", "found_inf", "skipped_total"}));
  EXPECT_EQ(json["scaler"]["scale"], 65536.0);
  EXPECT_EQ(json["scaler"]["growth_tracker"], 17);
  EXPECT_EQ(json["scaler"]["found_inf"], false);
  EXPECT_EQ(json["scaler"]["skipped_total"], 2);
}

TEST(JsonFormat, FloatsPrintAsTheirShortestDecimal) {
  EXPECT_EQ(json_number(0.1f).dump(), "0.1");
  EXPECT_EQ(json_number(1e-3f).dump(), "0.001");
  EXPECT_EQ(json_number(3.0f).dump(), "3.0");
  EXPECT_EQ(json_number(-kInf), "-inf");
}

TEST(JsonFormat, EventHasEveryField) {
  wire::Event event;
  event.rank = 1;
  event.seq = 40;
  event.step = 1234;
  event.kind = "first_nonfinite";
  event.layer = "blocks.0.attn.qkv.weight";
  event.detail = "grad has 12 NaN";
  event.stamp_unix_ns = 99;
  event.run = "gan";
  event.model = "critic";
  const Json json = to_json(event, LayerNames{});
  EXPECT_EQ(keys_of(json), (std::vector<std::string>{"type", "rank", "seq", "run", "model", "step",
                                                     "kind", "layer", "detail", "stamp_unix_ns", "cause",
                                                     "warning"}));
  EXPECT_TRUE(json["cause"].is_null());
  EXPECT_TRUE(json["warning"].is_null());
  EXPECT_EQ(json["type"], "event");
  EXPECT_EQ(json["kind"], "first_nonfinite");
  EXPECT_EQ(json["step"], 1234);
  EXPECT_EQ(json["run"], "gan");
  EXPECT_EQ(json["model"], "critic");
  EXPECT_EQ(json["rank"], 1);
  EXPECT_EQ(json["seq"], 40);
  EXPECT_EQ(json["layer"], "blocks.0.attn.qkv.weight");
  EXPECT_EQ(json["detail"], "grad has 12 NaN");

  event.cause = wire::Cause{"input", "aten::mul", "head", "1 of 8 values NaN", "Non-finite input at step 1234"};
  const Json with_cause = to_json(event, LayerNames{});
  EXPECT_EQ(keys_of(with_cause["cause"]), (std::vector<std::string>{"kind", "op", "module", "evidence", "sentence"}));
  EXPECT_EQ(with_cause["cause"]["kind"], "input");
  EXPECT_EQ(with_cause["cause"]["module"], "head");
  EXPECT_EQ(with_cause["cause"]["sentence"], "Non-finite input at step 1234");
}

// The forecaster's warning map (PROTOCOL §3.4) under its wire names, an unknown lead as -1: what
// an alert command reads on its standard input (keel-cli watch).
TEST(JsonFormat, AWarningEventCarriesItsWarningMap) {
  wire::Event event;
  event.step = 120;
  event.kind = wire::event_kind::kWarning;
  event.layer = "blocks.0.attn.qkv.weight";
  event.warning = wire::Warning{"update_ratio", 0.081, 0.031, 0.04, 35, "lower the learning rate"};
  const Json json = to_json(event, LayerNames{});
  EXPECT_EQ(keys_of(json["warning"]),
            (std::vector<std::string>{"signal", "value", "baseline", "per_step", "lead_steps", "advice"}));
  EXPECT_EQ(json["warning"]["signal"], "update_ratio");
  EXPECT_DOUBLE_EQ(json["warning"]["value"].get<double>(), 0.081);
  EXPECT_DOUBLE_EQ(json["warning"]["baseline"].get<double>(), 0.031);
  EXPECT_DOUBLE_EQ(json["warning"]["per_step"].get<double>(), 0.04);
  EXPECT_EQ(json["warning"]["lead_steps"], 35);
  EXPECT_EQ(json["warning"]["advice"], "lower the learning rate");
  event.warning->lead_steps = -1;
  EXPECT_EQ(to_json(event, LayerNames{})["warning"]["lead_steps"], -1);
}

TEST(JsonFormat, CommandHasEveryField) {
  wire::Command command;
  command.rank = -1;
  command.seq = 5;
  command.id = 77;
  command.kind = "policy";
  command.count = 2;
  command.label = "before-lr-change";
  command.policy = "skip_nonfinite";
  command.enable = true;
  const Json json = to_json(command, LayerNames{});
  EXPECT_EQ(keys_of(json), (std::vector<std::string>{"type", "rank", "seq", "id", "kind", "count",
                                                     "label", "policy", "enable", "at_step", "to_step",
                                                     "token"}));
  EXPECT_EQ(json["at_step"], -1);
  EXPECT_EQ(json["to_step"], -1);
  EXPECT_EQ(json["type"], "cmd");
  EXPECT_EQ(json["kind"], "policy");
  EXPECT_EQ(json["id"], 77);
  EXPECT_EQ(json["rank"], -1);
  EXPECT_EQ(json["count"], 2);
  EXPECT_EQ(json["label"], "before-lr-change");
  EXPECT_EQ(json["policy"], "skip_nonfinite");
  EXPECT_EQ(json["enable"], true);
}

TEST(JsonFormat, AckHasEveryField) {
  wire::Ack ack;
  ack.rank = 0;
  ack.seq = 6;
  ack.id = 77;
  ack.ok = true;
  ack.step = 1235;
  ack.path = "/tmp/dumps/step1235.pt";
  ack.bytes = 4096;
  ack.count = 12;
  ack.run = "gan";
  ack.model = "generator";
  const Json json = to_json(ack, LayerNames{});
  EXPECT_EQ(keys_of(json), (std::vector<std::string>{"type", "rank", "seq", "run", "model", "id",
                                                     "ok", "step", "error", "path", "bytes",
                                                     "count"}));
  EXPECT_EQ(json["type"], "ack");
  EXPECT_EQ(json["id"], 77);
  EXPECT_EQ(json["run"], "gan");
  EXPECT_EQ(json["model"], "generator");
  EXPECT_EQ(json["ok"], true);
  EXPECT_EQ(json["step"], 1235);
  EXPECT_EQ(json["error"], "");
  EXPECT_EQ(json["path"], "/tmp/dumps/step1235.pt");
  EXPECT_EQ(json["bytes"], 4096);
  EXPECT_EQ(json["count"], 12);
}

TEST(JsonFormat, LineIsOneLineAndSurvivesInvalidUtf8) {
  wire::Event event;
  event.kind = "note";
  event.detail = std::string("bad \xff\xfe bytes\nsecond line");
  const std::string line = to_json_line(event, LayerNames{});
  EXPECT_EQ(line.find('\n'), std::string::npos);
  const Json parsed = Json::parse(line);
  EXPECT_EQ(parsed["kind"], "note");
}

}  // namespace
}  // namespace keel::app
