// The probe's command socket, driven by a plain DEALER client: skip, policy and describe take
// effect at a step boundary and are acknowledged with that step; history is answered at once
// with the ring of step records; bad requests are refused at once and change nothing; a flood
// is refused with "busy" instead of queueing. Dumps: dump_test.cpp.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "command_rig.hpp"
#include "transport/command_server.hpp"
#include "keel/probe/probe.hpp"
#include "keel/wire/codec.hpp"
#include "two_layer_net.hpp"

namespace {

using keel::wire::Ack;
using keel::wire::Command;

using keel::test::all_identical;
using keel::test::Client;
using keel::test::command;
using keel::test::listening;
using keel::test::poison;
using keel::test::Rig;
using keel::test::Seen;
using keel::test::TwoLayer;

TEST(Commands, SkipCountTwoSkipsTheAcknowledgedStepAndTheNextThenApplies) {
  torch::manual_seed(0);
  Rig rig;
  for (int i = 0; i < 3; ++i) rig.step();   // AdamW has state to keep untouched
  Client client(rig.probe.bound_command_endpoint());
  Command skip = command(42, "skip");
  skip.count = 2;
  client.send(skip);
  const Ack ack = rig.step_until_ack(client);
  ASSERT_TRUE(ack.ok) << ack.error;
  EXPECT_EQ(ack.id, 42u);
  EXPECT_EQ(ack.count, 2) << "the ack says how many updates the skip covers";
  const int64_t s = ack.step;
  ASSERT_GE(s, 3);
  while (static_cast<int64_t>(rig.seen.size()) < s + 3) rig.step();

  for (int64_t k = 3; k < s; ++k) EXPECT_TRUE(rig.seen[k].outcome.applied) << "step " << k;
  for (int64_t k : {s, s + 1}) {
    const Seen& skipped = rig.seen[k];
    EXPECT_FALSE(skipped.outcome.applied) << "step " << k;
    EXPECT_EQ(skipped.outcome.skip_reason, "command") << "step " << k;
    EXPECT_TRUE(skipped.record.skipped);
    EXPECT_EQ(skipped.record.skip_reason, "command");
    EXPECT_TRUE(Rig::has_event(skipped, "skip")) << "step " << k;
    for (uint32_t l = 0; l < skipped.record.layer_count; ++l) {
      EXPECT_EQ(skipped.record.layer_value(keel::wire::LayerMetric::kUpdateRatio, l), 0.0f);
    }
  }
  // Parameters and optimizer state bit-identical across both skipped steps...
  EXPECT_TRUE(all_identical(rig.seen[s].state_before, rig.seen[s + 2].state_before));
  // ...and the step after them is applied again.
  EXPECT_TRUE(rig.seen[s + 2].outcome.applied);
  EXPECT_EQ(rig.seen[s + 2].outcome.skip_reason, "");
  EXPECT_FALSE(all_identical(rig.seen[s + 2].state_before, keel::test::params_and_adamw_state(*rig.net, rig.opt)));
  EXPECT_FALSE(client.receive(50)) << "one command, one ack";
}

// A data-parallel client names the steps (at_step), so every rank skips the same ones: the
// named steps are skipped whenever the command arrived before them, the steps between are
// applied, and a step already trained is refused with nothing scheduled.
TEST(Commands, SkipAtAStepSkipsExactlyThatStepAndRefusesAStepAlreadyTrained) {
  torch::manual_seed(0);
  Rig rig;
  for (int i = 0; i < 3; ++i) rig.step();
  Client client(rig.probe.bound_command_endpoint());
  Command skip = command(7, "skip");
  skip.at_step = 40;
  skip.count = 2;
  client.send(skip);
  const Ack ack = rig.step_until_ack(client);
  ASSERT_TRUE(ack.ok) << ack.error;
  EXPECT_EQ(ack.step, 40);
  EXPECT_EQ(ack.count, 2) << "steps 40 and 41";
  while (rig.seen.size() < 45) rig.step();
  for (int64_t k = 3; k < 45; ++k) {
    const bool named = k == 40 || k == 41;
    EXPECT_EQ(rig.seen[k].outcome.applied, !named) << "step " << k;
    EXPECT_EQ(rig.seen[k].outcome.skip_reason, named ? "command" : "") << "step " << k;
  }
  EXPECT_TRUE(all_identical(rig.seen[40].state_before, rig.seen[42].state_before));

  Command late = command(8, "skip");
  late.at_step = 10;
  client.send(late);
  const Ack refused = rig.step_until_ack(client);
  EXPECT_FALSE(refused.ok);
  EXPECT_EQ(refused.step, -1);
  EXPECT_EQ(refused.count, 0) << "a refused skip covers no update";
  EXPECT_NE(refused.error.find("already trained"), std::string::npos) << refused.error;
  Command far = command(9, "skip");
  far.at_step = int64_t(rig.seen.size()) + 2000000;
  client.send(far);
  const Ack too_far = rig.step_until_ack(client);
  EXPECT_FALSE(too_far.ok);
  EXPECT_NE(too_far.error.find("ahead"), std::string::npos) << too_far.error;
  const size_t before = rig.seen.size();
  for (int i = 0; i < 5; ++i) rig.step();
  for (size_t k = before; k < rig.seen.size(); ++k) EXPECT_TRUE(rig.seen[int64_t(k)].outcome.applied) << "step " << k;
}

TEST(Commands, PolicySkipNonfiniteOffAppliesANanStepAndOnSkipsItAgain) {
  Rig rig;
  rig.step();
  Client client(rig.probe.bound_command_endpoint());
  Command off = command(7, "policy");
  off.policy = "skip_nonfinite";
  off.enable = false;
  client.send(off);
  const Ack ack = rig.step_until_ack(client);
  ASSERT_TRUE(ack.ok) << ack.error;
  EXPECT_TRUE(Rig::has_event(rig.seen[ack.step], "policy"));

  rig.step(/*nan=*/true);
  const Seen& applied = rig.seen.rbegin()->second;
  EXPECT_GT(applied.outcome.nonfinite_layers, 0);
  EXPECT_TRUE(applied.outcome.applied) << applied.outcome.skip_reason;
  EXPECT_TRUE(torch::isnan(rig.net->fc1->weight).any().item<bool>());

  Command on = off;
  on.id = 8;
  on.enable = true;
  client.send(on);
  const Ack ack_on = rig.step_until_ack(client);
  ASSERT_TRUE(ack_on.ok) << ack_on.error;
  rig.step(/*nan=*/true);
  EXPECT_FALSE(rig.seen.rbegin()->second.outcome.applied);
  EXPECT_EQ(rig.seen.rbegin()->second.outcome.skip_reason, "nonfinite");
}

TEST(Commands, BadRequestsAreRefusedAtOnceAndChangeNothing) {
  Rig rig;
  Client client(rig.probe.bound_command_endpoint());
  auto refused = [&](const std::string& what, const std::string& error_part, uint64_t id) {
    // No step runs meanwhile: the command thread answers these by itself.
    const auto ack = client.receive(2000);
    ASSERT_TRUE(ack) << what << ": no immediate ack";
    EXPECT_FALSE(ack->ok) << what;
    EXPECT_EQ(ack->id, id) << what;
    EXPECT_EQ(ack->step, -1) << what;
    EXPECT_NE(ack->error.find(error_part), std::string::npos) << what << ": " << ack->error;
  };
  client.send_frames({"cmd", "\xc1\x00garbage"});
  refused("malformed bytes", "malformed command", 0);
  client.send_frames({"cmd", std::string(keel::probe::kMaxCommandBytes + 1, '\x80')});
  refused("oversized", "exceeds the limit", 0);
  client.send_frames({"cmd"});
  refused("one frame", "expected 2 frames", 0);
  client.send(command(1, "explode"));
  refused("unknown kind", "unknown command kind \"explode\"", 1);
  Command zero = command(2, "skip");
  zero.count = 0;
  client.send(zero);
  refused("count 0", "skip count must be between 1 and", 2);
  Command huge = command(3, "skip");
  huge.count = keel::probe::kMaxSkipCount + 1;
  client.send(huge);
  refused("count too large", "skip count must be between 1 and", 3);
  Command policy = command(4, "policy");
  policy.policy = "skip_everything";
  client.send(policy);
  refused("unknown policy", "unknown policy \"skip_everything\"", 4);
  Command other_rank = command(5, "skip");
  other_rank.rank = 3;
  client.send(other_rank);
  refused("other rank", "rank 3", 5);
  Command long_label = command(6, "dump");
  long_label.label = std::string(keel::probe::kMaxLabelBytes + 1, 'x');
  client.send(long_label);
  refused("dump label too long", "dump label of", 6);
  Command no_history = command(7, "history");
  no_history.count = 0;
  client.send(no_history);
  refused("history count 0", "history count must be between 1 and", 7);

  // Nothing reached the training thread: every step applies and nothing more is answered.
  for (int i = 0; i < 3; ++i) {
    rig.step();
    EXPECT_TRUE(rig.seen.rbegin()->second.outcome.applied);
    EXPECT_TRUE(rig.seen.rbegin()->second.events.empty());
  }
  EXPECT_FALSE(client.receive(100));
}

TEST(Commands, PendingSkipsAreCappedAndQueueAfterEachOther) {
  Rig rig;
  Client client(rig.probe.bound_command_endpoint());
  // Long enough to still be running however many steps pass before the next command lands.
  Command first = command(1, "skip");
  first.count = 1000;
  client.send(first);
  const Ack a = rig.step_until_ack(client);
  ASSERT_TRUE(a.ok) << a.error;
  // A second skip while the first runs starts where the first ends.
  Command second = command(2, "skip");
  second.count = 1;
  client.send(second);
  const Ack b = rig.step_until_ack(client);
  ASSERT_TRUE(b.ok) << b.error;
  EXPECT_EQ(b.step, a.step + 1000);
  EXPECT_EQ(a.count, 1000);
  EXPECT_EQ(b.count, 1) << "its own updates, not those still pending before it";
  // Each alone is within the limit; together they would pass it.
  Command too_many = command(3, "skip");
  too_many.count = keel::probe::kMaxSkipCount;
  client.send(too_many);
  const Ack c = rig.step_until_ack(client);
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.step, -1);
  EXPECT_EQ(c.count, 0);
  EXPECT_NE(c.error.find("pending"), std::string::npos) << c.error;
  for (const auto& [step, seen] : rig.seen) {
    EXPECT_EQ(seen.outcome.skip_reason, step >= a.step ? "command" : "") << "step " << step;
  }
}

TEST(Commands, AFloodIsRefusedAsBusyInsteadOfQueued) {
  Rig rig;
  Client client(rig.probe.bound_command_endpoint());
  constexpr int kSent = 80;
  // The command server holds this many until a step answers them; the rest are refused.
  const int kQueued = int(keel::probe::CommandServerOptions{}.queue_capacity);
  for (int i = 0; i < kSent; ++i) client.send(command(100 + i, "describe"));
  int busy = 0;
  // Waits for every refusal however slow the machine (a silence of a few hundred ms was not
  // proof under TSan), then a little longer for any refusal too many.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (busy < kSent - kQueued && std::chrono::steady_clock::now() < give_up) {
    if (auto ack = client.receive(100)) {
      EXPECT_FALSE(ack->ok);
      EXPECT_NE(ack->error.find("busy"), std::string::npos) << ack->error;
      ++busy;
    }
  }
  while (auto ack = client.receive(300)) {
    EXPECT_FALSE(ack->ok) << "answered before any step";
    ++busy;
  }
  EXPECT_EQ(busy, kSent - kQueued);
  rig.step();   // answers every queued one at this step
  int ok = 0;
  while (auto ack = client.receive(300)) {
    EXPECT_TRUE(ack->ok) << ack->error;
    EXPECT_EQ(ack->step, 0);
    ++ok;
  }
  EXPECT_EQ(ok + busy, kSent);
}

TEST(Commands, HistoryIsAnsweredAtOnceWithTheRingOldestFirst) {
  keel::probe::ProbeOptions options = listening();
  options.history_steps = 16;
  Rig rig(options);
  for (int i = 0; i < 40; ++i) rig.step();
  // The ring is filled by the publisher thread, which may trail the last step a little.
  Client client(rig.probe.bound_command_endpoint());
  std::optional<Ack> ack;
  for (int attempt = 0; attempt < 50; ++attempt) {
    Command history = command(11 + attempt, "history");
    history.count = 10;
    client.send(history);
    ack = client.receive(2000);   // no step runs: the command thread answers by itself
    ASSERT_TRUE(ack);
    if (ack->step == 39) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(ack->ok) << ack->error;
  EXPECT_EQ(ack->step, 39);
  EXPECT_EQ(ack->count, 10);
  const auto& steps = client.steps();
  ASSERT_GE(steps.size(), 10u);
  // The last reply's 10 records: steps 30..39 in order, as published.
  for (size_t i = 0; i < 10; ++i) {
    const auto& payload = steps[steps.size() - 10 + i];
    const auto decoded = keel::wire::decode(payload.data(), payload.size());
    ASSERT_TRUE(decoded.ok) << decoded.error;
    const auto& record = std::get<keel::wire::StepRecord>(decoded.message);
    EXPECT_EQ(record.step, static_cast<int64_t>(30 + i));
    EXPECT_EQ(record.layer_count, 4u);
  }

  // Asking for more than the ring holds gives the whole ring.
  const size_t before = client.steps().size();
  Command all = command(99, "history");
  all.count = keel::probe::kMaxHistoryCount;
  client.send(all);
  const auto whole = client.receive(2000);
  ASSERT_TRUE(whole && whole->ok);
  EXPECT_EQ(whole->count, 16);
  EXPECT_EQ(client.steps().size() - before, 16u);
}

// The events the probe keeps follow the steps of a history answer: all of them for the whole
// ring (a first non-finite gradient older than every step kept still reaches a late client),
// only those of the steps sent for a shorter answer. Neither counts in the ack.
TEST(Commands, HistoryAnswerCarriesTheEventsTheProbeKeeps) {
  keel::probe::ProbeOptions options = listening();
  options.history_steps = 16;
  Rig rig(options);
  for (int i = 0; i < 5; ++i) rig.step();
  rig.step(/*nan=*/true);   // step 5: first_nonfinite and skip events
  ASSERT_TRUE(Rig::has_event(rig.seen[5], "first_nonfinite"));
  for (int i = 0; i < 34; ++i) rig.step();   // steps 6..39: the ring holds 24..39
  Client client(rig.probe.bound_command_endpoint());
  auto ask = [&](uint64_t id, int64_t count) {
    std::optional<Ack> ack;
    for (int attempt = 0; attempt < 50; ++attempt) {   // the publisher may trail the last step
      const size_t before = client.events().size();
      Command history = command(id * 100 + uint64_t(attempt), "history");
      history.count = count;
      client.send(history);
      ack = client.receive(2000);
      if (!ack || ack->step == 39) {
        return std::make_pair(ack, std::vector<std::string>(client.events().begin() + long(before), client.events().end()));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return std::make_pair(ack, std::vector<std::string>{});
  };

  const auto [whole, whole_events] = ask(1, keel::probe::kMaxHistoryCount);
  ASSERT_TRUE(whole && whole->ok);
  EXPECT_EQ(whole->count, 16) << "events are not counted as steps";
  std::vector<std::string> kinds;
  uint64_t last_seq = 0;
  for (const std::string& payload : whole_events) {
    const auto decoded = keel::wire::decode(payload.data(), payload.size());
    ASSERT_TRUE(decoded.ok) << decoded.error;
    const auto& event = std::get<keel::wire::Event>(decoded.message);
    EXPECT_GT(event.seq, last_seq) << "oldest first, with their original seq";
    last_seq = event.seq;
    if (event.step == 5) kinds.push_back(event.kind);
  }
  EXPECT_NE(std::find(kinds.begin(), kinds.end(), "first_nonfinite"), kinds.end());
  EXPECT_NE(std::find(kinds.begin(), kinds.end(), "skip"), kinds.end());

  const auto [recent, recent_events] = ask(2, 10);
  ASSERT_TRUE(recent && recent->ok);
  EXPECT_EQ(recent->count, 10);
  for (const std::string& payload : recent_events) {
    const auto decoded = keel::wire::decode(payload.data(), payload.size());
    ASSERT_TRUE(decoded.ok);
    EXPECT_GE(std::get<keel::wire::Event>(decoded.message).step, 30) << "only events of the steps sent";
  }
}

// A subscriber to the probe's run descriptions only.
class DescriptionListener {
 public:
  explicit DescriptionListener(const std::string& endpoint) {
    sub_.set(zmq::sockopt::linger, 0);
    sub_.set(zmq::sockopt::subscribe, "run");
    keel::test::present_users_key(sub_);
    sub_.connect(endpoint);
  }
  // The descriptions that arrive until none has for `quiet_ms`.
  int count_until_quiet(int quiet_ms) {
    int runs = 0;
    zmq::pollitem_t item{static_cast<void*>(sub_), 0, ZMQ_POLLIN, 0};
    while (zmq::poll(&item, 1, std::chrono::milliseconds(quiet_ms)) > 0) {
      zmq::message_t frame;
      while (sub_.recv(frame, zmq::recv_flags::dontwait)) {
        if (!frame.more()) ++runs;
      }
    }
    return runs;
  }

 private:
  zmq::context_t context_{1};
  zmq::socket_t sub_{context_, zmq::socket_type::sub};
};

TEST(Commands, DescribeResendsTheRunDescription) {
  Rig rig;
  DescriptionListener listener(rig.probe.bound_endpoint());
  // The description sent to a new subscriber, and the publisher's start-up one, which may trail
  // it; after that, with a 60 s interval, only the describe command can send another.
  ASSERT_GT(listener.count_until_quiet(2000), 0) << "the description sent to a new subscriber";
  Client client(rig.probe.bound_command_endpoint());
  client.send(command(9, "describe"));
  const Ack ack = rig.step_until_ack(client);
  ASSERT_TRUE(ack.ok) << ack.error;
  EXPECT_GT(listener.count_until_quiet(2000), 0) << "describe did not re-send the run description";
}

// A burst of describe and policy commands is answered one by one, but the description goes
// out once per step that took any: a client cannot fill the publisher's queue (and drop step
// records) with copies of it.
TEST(Commands, ABurstOfDescribesSendsOneDescriptionPerStep) {
  Rig rig;
  DescriptionListener listener(rig.probe.bound_endpoint());
  ASSERT_GT(listener.count_until_quiet(2000), 0) << "the description sent to a new subscriber";
  Client client(rig.probe.bound_command_endpoint());
  constexpr int kSent = 40;
  for (int i = 0; i < kSent; ++i) {
    Command c = command(200 + i, i % 2 ? "describe" : "policy");
    c.policy = "skip_spike";
    c.enable = i % 4 == 0;
    client.send(c);
  }
  int answered = 0;
  int steps = 0;
  while (answered < kSent && steps < 200) {
    rig.step();
    ++steps;
    while (auto ack = client.receive(50)) {
      EXPECT_TRUE(ack->ok) << ack->error;
      ++answered;
    }
  }
  ASSERT_EQ(answered, kSent);
  const int runs = listener.count_until_quiet(500);
  EXPECT_GE(runs, 1);
  EXPECT_LE(runs, steps) << kSent << " commands in " << steps << " steps";
  EXPECT_EQ(rig.probe.last_record().dropped, 0u);
}

TEST(Commands, CommandSocketIsOnTheNextPortAndAbsentWithoutTelemetry) {
  TwoLayer net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1));
  keel::probe::ProbeOptions none;
  none.endpoint = "";
  EXPECT_EQ(keel::probe::Probe(*net, opt, none).bound_command_endpoint(), "");
  EXPECT_EQ(keel::probe::command_endpoint_of("tcp://127.0.0.1:5557"), "tcp://127.0.0.1:5558");
  EXPECT_EQ(keel::probe::command_endpoint_of("tcp://127.0.0.1:*"), "tcp://127.0.0.1:*");
  EXPECT_EQ(keel::probe::command_endpoint_of("ipc:///tmp/keel.sock"), "");

  // Find a port pair that is free by binding the pair ourselves first, then releasing it.
  for (int attempt = 0; attempt < 20; ++attempt) {
    std::string pub;
    {
      keel::probe::Probe probe(*net, opt, listening());
      pub = probe.bound_endpoint();
    }
    const std::string expected = keel::wire::command_endpoint_for(pub);
    if (expected.empty()) continue;
    keel::probe::ProbeOptions fixed = listening();
    fixed.endpoint = pub;
    try {
      keel::probe::Probe probe(*net, opt, fixed);
      EXPECT_EQ(probe.bound_command_endpoint(), expected);
      return;
    } catch (const keel::probe::AttachError&) {
      // The next port was taken by someone else; try another pair.
    }
  }
  FAIL() << "no free port pair found";
}

}  // namespace
