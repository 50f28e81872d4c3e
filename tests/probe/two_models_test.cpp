// Two probes in one process, one per model (a GAN's generator and discriminator): their runs
// never share an identity, every message says which run it belongs to, the model's name is in
// the description and in the dump names, and a name that cannot be a file name is refused.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "command_rig.hpp"
#include "quiet_options.hpp"
#include "layout/run_description.hpp"
#include "temp_dir.hpp"
#include "two_layer_net.hpp"

namespace {

namespace fs = std::filesystem;
using keel::test::Client;
using keel::test::command;
using keel::test::listening;
using keel::test::quiet;
using keel::test::Rig;
using keel::test::TempDir;
using keel::test::TwoLayer;

keel::probe::ProbeOptions quiet_model(const std::string& model) {
  keel::probe::ProbeOptions options = quiet();
  options.model = model;
  return options;
}

TEST(TwoModels, DefaultRunIdsDifferAndEveryRecordAndEventSaysWhichRun) {
  torch::manual_seed(0);
  TwoLayer generator_net, discriminator_net;
  torch::optim::SGD generator_opt(generator_net->parameters(), torch::optim::SGDOptions(0.1));
  torch::optim::SGD discriminator_opt(discriminator_net->parameters(), torch::optim::SGDOptions(0.1));
  // Attached back to back: the same process and, often, the same millisecond.
  keel::probe::Probe generator(*generator_net, generator_opt, quiet_model("generator"));
  keel::probe::Probe discriminator(*discriminator_net, discriminator_opt, quiet_model("discriminator"));
  EXPECT_NE(generator.description().run_id, discriminator.description().run_id);
  EXPECT_EQ(generator.description().model, "generator");
  EXPECT_EQ(discriminator.description().model, "discriminator");

  keel::test::forward_backward(generator_net, generator_opt, 0);
  generator.step(torch::tensor(1.0));
  keel::test::forward_backward(discriminator_net, discriminator_opt, 0);
  keel::test::poison(discriminator_net->fc1->weight);
  discriminator.step(torch::tensor(1.0));

  EXPECT_EQ(generator.last_record().run, generator.description().run_id);
  EXPECT_EQ(generator.last_record().model, "generator");
  EXPECT_EQ(discriminator.last_record().run, discriminator.description().run_id);
  EXPECT_EQ(discriminator.last_record().model, "discriminator");
  ASSERT_FALSE(discriminator.last_events().empty()) << "a non-finite gradient raises events";
  for (const auto& event : discriminator.last_events()) {
    EXPECT_EQ(event.run, discriminator.description().run_id) << event.kind;
    EXPECT_EQ(event.model, "discriminator") << event.kind;
  }
}

// Not left to the clock: two probes attached within one millisecond still differ.
TEST(TwoModels, EachDefaultRunIdEndsWithTheProbesCountInTheProcess) {
  keel::probe::default_run_id();   // the process's first id has no count
  const std::string a = keel::probe::default_run_id();
  const std::string b = keel::probe::default_run_id();
  const auto count = [](const std::string& id) { return std::stoull(id.substr(id.rfind('-') + 1)); };
  EXPECT_LT(count(a), 1000000u) << a << ": the last part is a count, not the start time";
  EXPECT_EQ(count(b), count(a) + 1) << a << " then " << b;
}

TEST(TwoModels, AModelNameThatCannotBeAFileNameIsRefusedAtAttach) {
  TwoLayer net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1));
  for (const std::string& bad : std::vector<std::string>{"gen/../d", "two words", ".hidden", std::string(65, 'g')}) {
    EXPECT_THROW(keel::probe::Probe(*net, opt, quiet_model(bad)), keel::probe::AttachError) << bad;
  }
  EXPECT_NO_THROW(keel::probe::Probe(*net, opt, quiet_model("critic-v2.1_ema")));
}

TEST(TwoModels, TheAckNamesTheRunThatAnswered) {
  keel::probe::ProbeOptions options = listening();
  options.model = "critic";
  Rig rig(options);
  Client client(rig.probe.bound_command_endpoint());
  client.send(command(5, "describe"));
  const keel::wire::Ack ack = rig.step_until_ack(client);
  EXPECT_TRUE(ack.ok) << ack.error;
  EXPECT_EQ(ack.run, rig.probe.description().run_id);
  EXPECT_EQ(ack.model, "critic");
}

// Both models of a job may dump the same step into one directory: the model tells them apart.
TEST(TwoModels, ADumpIsNamedAfterItsModel) {
  torch::manual_seed(1);
  TempDir tmp("two-models-dump");
  keel::probe::ProbeOptions options = quiet_model("discriminator");
  options.dump_dir = (tmp.path() / "dumps").string();
  options.dump_on_nonfinite = true;
  TwoLayer net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1));
  const fs::path expected = tmp.path() / "dumps" / "step-0-nonfinite-discriminator";
  keel::probe::Probe probe(*net, opt, options);
  // The dump is written by a thread of its own while training goes on.
  for (int step = 0; step < 300 && !fs::exists(expected); ++step) {
    keel::test::forward_backward(net, opt, step);
    if (step == 0) keel::test::poison(net->fc1->weight);
    probe.step(torch::tensor(1.0));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(fs::exists(expected / "model.pt"));
}

}  // namespace
