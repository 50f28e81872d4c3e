// The probe records its run by default: one file per run and rank under record_dir, named in
// its description, holding every description, step record and event in order, with or without
// a telemetry socket; "" records nothing; a directory that cannot be written leaves training
// as it was and says so in an event.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "keel/wire/codec.hpp"
#include "keel/wire/recording_reader.hpp"
#include "command_rig.hpp"
#include "quiet_options.hpp"
#include "temp_dir.hpp"
#include "two_layer_net.hpp"

namespace {

namespace fs = std::filesystem;
using keel::test::quiet;
using keel::test::TempDir;
using keel::test::TwoLayer;

struct Recorded {
  std::vector<keel::wire::RunDescription> descriptions;
  std::vector<keel::wire::StepRecord> steps;
  std::vector<keel::wire::Event> events;
};

Recorded read_recording(const std::string& path) {
  Recorded out;
  std::string error;
  auto reader = keel::wire::RecordingReader::open(path, error);
  EXPECT_TRUE(reader) << error;
  if (!reader) return out;
  EXPECT_TRUE(reader->warnings().empty()) << reader->warnings().front();
  reader->read_all([&](const keel::wire::RecordingFrame& f) {
    keel::wire::DecodeResult d = keel::wire::decode(f.data, f.size);
    ASSERT_TRUE(d.ok) << d.error;
    if (auto* r = std::get_if<keel::wire::RunDescription>(&d.message)) out.descriptions.push_back(std::move(*r));
    if (auto* s = std::get_if<keel::wire::StepRecord>(&d.message)) out.steps.push_back(std::move(*s));
    if (auto* e = std::get_if<keel::wire::Event>(&d.message)) out.events.push_back(std::move(*e));
  });
  return out;
}

// Six steps, a NaN in the gradient of the fourth.
void train(keel::probe::Probe& probe, TwoLayer& net, torch::optim::SGD& opt) {
  for (int s = 0; s < 6; ++s) {
    keel::test::forward_backward(net, opt, s);
    if (s == 3) keel::test::poison(net->fc1->weight);
    probe.step(torch::tensor(1.0));
  }
}

TEST(Recording, TheProbeRecordsEveryDescriptionRecordAndEventUnderRecordDir) {
  TempDir dir("record");
  torch::manual_seed(0);
  TwoLayer net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1));
  keel::probe::ProbeOptions options = quiet();   // no socket: recorded all the same
  options.record_dir = (dir.path() / "runs").string();
  options.model = "critic";
  options.rank = 0;
  std::string path;
  std::string run_id;
  {
    keel::probe::Probe probe(*net, opt, options);
    path = probe.recording_path();
    run_id = probe.description().run_id;
    EXPECT_EQ(probe.description().recording, path);
    train(probe, net, opt);
    EXPECT_EQ(probe.last_record().record_dropped, 0u);
  }
  ASSERT_FALSE(path.empty());
  EXPECT_TRUE(fs::path(path).is_absolute()) << path;
  EXPECT_EQ(fs::path(path).parent_path(), fs::absolute(dir.path() / "runs"));
  EXPECT_EQ(fs::path(path).filename().string(), run_id + "-critic-rank0.keelrec");

  const Recorded recorded = read_recording(path);
  ASSERT_FALSE(recorded.descriptions.empty());
  EXPECT_EQ(recorded.descriptions.front().run_id, run_id);
  EXPECT_EQ(recorded.descriptions.front().recording, path);
  EXPECT_EQ(recorded.descriptions.front().layers.size(), 4u);
  ASSERT_EQ(recorded.steps.size(), 6u);
  for (int s = 0; s < 6; ++s) {
    EXPECT_EQ(recorded.steps[s].step, s);
    EXPECT_EQ(recorded.steps[s].layer_count, 4u);
  }
  EXPECT_TRUE(recorded.steps[3].skipped);
  bool first_nonfinite = false;
  for (const auto& e : recorded.events) first_nonfinite |= e.kind == "first_nonfinite" && e.step == 3;
  EXPECT_TRUE(first_nonfinite);
}

TEST(Recording, AnEmptyRecordDirRecordsNothing) {
  TwoLayer net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1));
  keel::probe::Probe probe(*net, opt, quiet());
  EXPECT_EQ(probe.recording_path(), "");
  EXPECT_EQ(probe.description().recording, "");
}

TEST(Recording, ADirectoryThatCannotBeMadeLeavesTrainingAsItWasAndSaysSo) {
  TempDir dir("record-blocked");
  const fs::path file = dir.path() / "a-file";
  { std::ofstream(file) << "not a directory"; }
  torch::manual_seed(0);
  TwoLayer net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1));
  keel::probe::ProbeOptions options = quiet();
  options.record_dir = (file / "runs").string();
  keel::probe::Probe probe(*net, opt, options);
  EXPECT_EQ(probe.recording_path(), "");
  keel::test::forward_backward(net, opt, 0);
  const keel::probe::StepOutcome outcome = probe.step(torch::tensor(1.0));
  EXPECT_TRUE(outcome.applied);
  bool told = false;
  for (const auto& e : probe.last_events()) {
    if (e.kind != "record_dropped") continue;
    told = true;
    EXPECT_NE(e.detail.find("not recorded"), std::string::npos) << e.detail;
    EXPECT_NE(e.detail.find("a-file"), std::string::npos) << e.detail;
  }
  EXPECT_TRUE(told);
}

}  // namespace
