// Rewind (docs/rewind.md): the probe keeps snapshots of the training state every rewind_every
// steps, and a "rewind" command puts one back at a step boundary. Put back means all of it:
// after a rewind to step S, the same batches as before give the same weights bit for bit, which
// only holds when the weights, the optimizer's moments and step counts all came back. Every
// optimizer the probe knows (AdamW, Adam, SGD with their variants) hands its state out as
// tensors; any other (RMSprop here) is put back from its archive.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "command_rig.hpp"
#include "keel/probe/probe.hpp"
#include "keel/wire/vocabulary.hpp"
#include "optimizer_cases.hpp"
#include "two_layer_net.hpp"

namespace {

using keel::test::Client;
using keel::test::command;
using keel::test::TwoLayer;

std::vector<torch::Tensor> weights_of(TwoLayer& net) {
  std::vector<torch::Tensor> out;
  for (const auto& p : net->parameters()) out.push_back(p.detach().clone());
  return out;
}

struct RewoundRun {
  explicit RewoundRun(const keel::test::MakeOptimizer& make, int64_t every = 4, int64_t keep = 8) {
    torch::manual_seed(0);
    net = TwoLayer();
    optimizer = make(net->parameters());
    keel::probe::ProbeOptions options = keel::test::listening();
    options.rewind_every = every;
    options.rewind_keep = keep;
    options.on_rewind = [this](int64_t from, int64_t to, double lr_factor) {
      told = std::make_pair(from, to);
      told_lr_factor = lr_factor;
    };
    probe = std::make_unique<keel::probe::Probe>(*net, *optimizer, options);
  }
  // One step on the batch of seed `next` (the probe's step number): the weights it began from
  // are kept under that number, until a rewind takes the step back.
  keel::probe::StepOutcome step() {
    before[next] = weights_of(net);
    keel::test::forward_backward(net, *optimizer, next);
    const keel::probe::StepOutcome outcome = probe->step(torch::tensor(1.0));
    events = probe->last_events();
    next = told ? told->second : outcome.step + 1;
    return outcome;
  }
  // Sends a rewind command (to_step -1: the newest snapshot) and steps until it is answered.
  keel::wire::Ack rewind_by_command(Client& client, uint64_t id, int64_t to_step = -1) {
    keel::wire::Command rewind = command(id, keel::wire::command_kind::kRewind);
    rewind.to_step = to_step;
    client.send(rewind);
    return step_until_ack(client);
  }
  // Steps until the probe answers `client`.
  keel::wire::Ack step_until_ack(Client& client) {
    for (int i = 0; i < 200; ++i) {
      last = step();
      if (auto ack = client.receive(20)) return *ack;
    }
    ADD_FAILURE() << "no ack after 200 steps";
    return {};
  }
  const keel::wire::Event* event(const std::string& kind) const {
    for (const auto& e : events) {
      if (e.kind == kind) return &e;
    }
    return nullptr;
  }

  TwoLayer net{nullptr};
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  std::unique_ptr<keel::probe::Probe> probe;
  std::optional<std::pair<int64_t, int64_t>> told;
  double told_lr_factor = 0;   // what on_rewind was told the learning rate was multiplied by
  int64_t next = 0;
  std::map<int64_t, std::vector<torch::Tensor>> before;   // weights each step began from, the latest run
  std::vector<keel::wire::Event> events;
  keel::probe::StepOutcome last;
};

std::vector<keel::test::OptimizerCase> rewound_optimizers() {
  auto cases = keel::test::optimizer_cases();
  cases.push_back({"RMSprop (from its archive)", [](auto p) {
                     return std::make_unique<torch::optim::RMSprop>(p, torch::optim::RMSpropOptions(1e-2).momentum(0.5));
                   }});
  return cases;
}

TEST(Rewind, ACommandPutsTheSnapshotBackAndTheSameBatchesRetraceTheSameWeightsBitForBit) {
  for (const auto& c : rewound_optimizers()) {
    SCOPED_TRACE(c.name);
    RewoundRun run(c.make);
    while (run.next < 10) run.step();
    const std::map<int64_t, std::vector<torch::Tensor>> original = run.before;

    Client client(run.probe->bound_command_endpoint());
    const keel::wire::Ack ack = run.rewind_by_command(client, 7, /*to_step=*/6);
    ASSERT_TRUE(ack.ok) << ack.error;
    EXPECT_EQ(ack.step, 4) << "the newest snapshot at or before step 6 (every 4 steps)";
    ASSERT_TRUE(run.told.has_value()) << "on_rewind is told in the step that took the command";
    const int64_t from = run.told->first;
    EXPECT_EQ(run.told->second, 4);
    EXPECT_EQ(run.last.step, from);
    EXPECT_FALSE(run.last.applied);
    EXPECT_EQ(run.last.skip_reason, "rewind");
    EXPECT_EQ(run.probe->last_record().skip_reason, "rewind");
    const keel::wire::Event* told = run.event(keel::wire::event_kind::kRewind);
    ASSERT_NE(told, nullptr);
    EXPECT_EQ(told->step, from);
    EXPECT_NE(told->detail.find("rewound from step " + std::to_string(from) + " to step 4 (command 7)"),
              std::string::npos)
        << told->detail;
    EXPECT_TRUE(keel::test::all_identical(weights_of(run.net), original.at(4)));

    // The same batches again: every step lands on the weights the first pass had.
    run.told.reset();
    for (int64_t s = 4; s < 9; ++s) {
      const keel::probe::StepOutcome outcome = run.step();
      EXPECT_EQ(outcome.step, s) << "the steps are numbered from the snapshot's on";
      EXPECT_TRUE(outcome.applied);
      EXPECT_TRUE(keel::test::all_identical(weights_of(run.net), original.at(s + 1))) << "after step " << s;
    }
  }
}

TEST(Rewind, IsRefusedInWordsWithoutSnapshotsOrBeforeTheOldestAndChangesNothing) {
  const auto adamw = keel::test::optimizer_cases().front().make;
  {
    RewoundRun run(adamw, /*every=*/0);
    for (int i = 0; i < 3; ++i) run.step();
    Client client(run.probe->bound_command_endpoint());
    const keel::wire::Ack ack = run.rewind_by_command(client, 1);
    EXPECT_FALSE(ack.ok);
    EXPECT_NE(ack.error.find("rewind_every is 0"), std::string::npos) << ack.error;
    EXPECT_FALSE(run.told);
    EXPECT_TRUE(run.last.applied);
    EXPECT_EQ(run.probe->last_record().snapshot_bytes, 0u) << "no snapshots: the dashboard's Rewind is off";
  }
  RewoundRun run(adamw, /*every=*/4, /*keep=*/2);
  while (run.next < 13) run.step();
  // Two snapshots of the net's weights and AdamW's two moments, 4 bytes each (and the step counts).
  int64_t numel = 0;
  for (const auto& p : run.net->parameters()) numel += p.numel();
  EXPECT_GE(run.probe->last_record().snapshot_bytes, uint64_t(2 * 3 * 4 * numel));
  EXPECT_LT(run.probe->last_record().snapshot_bytes, uint64_t(2 * 3 * 4 * numel + 4096));
  Client client(run.probe->bound_command_endpoint());
  const keel::wire::Ack ack = run.rewind_by_command(client, 2, /*to_step=*/5);
  EXPECT_FALSE(ack.ok);
  EXPECT_NE(ack.error.find("no snapshot at or before step 5 (kept: 8, 12)"), std::string::npos) << ack.error;
  EXPECT_FALSE(run.told);
  EXPECT_TRUE(run.last.applied);
}

// The snapshots of the abandoned span are forgotten: a second rewind cannot go "forward" into it.
TEST(Rewind, ForgetsTheSnapshotsOfTheSpanItAbandons) {
  RewoundRun run(keel::test::optimizer_cases().front().make, /*every=*/4, /*keep=*/8);
  while (run.next < 14) run.step();
  Client client(run.probe->bound_command_endpoint());
  ASSERT_TRUE(run.rewind_by_command(client, 1, /*to_step=*/4).ok);
  ASSERT_TRUE(run.told);
  run.told.reset();
  run.step();   // step 4 again; its end snapshots nothing new (5 is not due)
  const keel::wire::Ack ack = run.rewind_by_command(client, 2, /*to_step=*/12);
  ASSERT_TRUE(ack.ok) << ack.error;
  EXPECT_EQ(ack.step, 4) << "8 and 12 were of the abandoned span";
}

}  // namespace
