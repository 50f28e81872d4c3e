// Dumps through the probe: a "dump" command writes a checkpoint of exactly the acknowledged
// step's state that loads into a fresh model and optimizer; the first non-finite gradient
// dumps once per episode and rate window; a dump that cannot be written is an event and an
// error ack while training goes on.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>
#include <torch/torch.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "command_rig.hpp"
#include "keel/wire/codec.hpp"
#include "directory_entries.hpp"
#include "in_directory.hpp"
#include "temp_dir.hpp"
#include "two_layer_net.hpp"

namespace {

namespace fs = std::filesystem;
using keel::test::directory_entries;
using keel::test::InDirectory;
using keel::test::all_identical;
using keel::test::Client;
using keel::test::command;
using keel::test::listening;
using keel::test::Rig;
using keel::test::TempDir;
using keel::test::TwoLayer;
using keel::wire::Ack;
using keel::wire::Command;

keel::probe::ProbeOptions dumping_into(const fs::path& dir) {
  keel::probe::ProbeOptions options = listening();
  options.dump_dir = dir.string();
  options.dump_on_nonfinite = true;
  return options;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

// Steps of these models take a millisecond; a dump's fsyncs, on a loaded machine, seconds.
// Waits for a dump's result give it this many 5 ms steps (30 s) before they fail.
constexpr int kStepsForADump = 6000;

// The first event of `kind` any step raised so far, stepping on until one is raised (dump
// results come back on a later step).
const keel::wire::Event* step_until_event(Rig& rig, const std::string& kind) {
  for (int i = 0; i < kStepsForADump; ++i) {
    for (const auto& [step, seen] : rig.seen) {
      for (const auto& e : seen.events) {
        if (e.kind == kind) return &e;
      }
    }
    rig.step();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return nullptr;
}

// A trainer killed while dumping left a partial dump behind: the next probe attached to the
// same dump directory removes it and says so in its first step's events; another live
// process's partial dump (pid 1's name) is left alone.
TEST(Dump, AttachRemovesThePartialDumpsOfWritersThatAreGone) {
  TempDir tmp("dump-stale");
  const fs::path dumps = tmp.path() / "dumps";
  const pid_t gone = fork();
  if (gone == 0) _exit(0);
  waitpid(gone, nullptr, 0);
  const std::string debris = ".step-3-command.partial-" + std::to_string(gone) + "-0";
  fs::create_directories(dumps / debris);
  std::ofstream(dumps / debris / "model.pt") << std::string(4096, 'm');
  fs::create_directories(dumps / ".step-4-command.partial-1-0");

  Rig rig(dumping_into(dumps));
  EXPECT_EQ(directory_entries(dumps), std::vector<std::string>{".step-4-command.partial-1-0"});
  const keel::wire::Event* cleaned = step_until_event(rig, "dumps_cleaned");
  ASSERT_NE(cleaned, nullptr);
  EXPECT_NE(cleaned->detail.find("removed 1 partial dump(s) of 4096 bytes"), std::string::npos) << cleaned->detail;
  EXPECT_NE(cleaned->detail.find(debris), std::string::npos) << cleaned->detail;
}

TEST(Dump, CommandedDumpHoldsTheAcknowledgedStepsStateAndLoadsIntoAFreshModel) {
  torch::manual_seed(3);
  TempDir tmp("dump-command");
  Rig rig(dumping_into(tmp.path() / "dumps"));
  for (int i = 0; i < 3; ++i) rig.step();   // AdamW has moments by now
  Client client(rig.probe.bound_command_endpoint());
  Command dump = command(21, "dump");
  dump.label = "before lr/../bump";
  client.send(dump);
  const Ack ack = rig.step_until_ack(client);
  ASSERT_TRUE(ack.ok) << ack.error;
  EXPECT_EQ(ack.id, 21u);
  const int64_t s = ack.step;
  ASSERT_GE(s, 3);
  const fs::path dir = tmp.path() / "dumps" / ("step-" + std::to_string(s) + "-command-before_lr_.._bump");
  EXPECT_EQ(ack.path, dir.string());
  EXPECT_EQ(directory_entries(tmp.path() / "dumps"), std::vector<std::string>{dir.filename().string()}) << "no partial left";
  int64_t on_disk = 0;
  for (const auto& e : fs::directory_iterator(dir)) on_disk += static_cast<int64_t>(fs::file_size(e.path()));
  EXPECT_EQ(ack.bytes, on_disk);
  EXPECT_EQ(directory_entries(dir), (std::vector<std::string>{"manifest.json", "model.pt", "optimizer.pt", "run.msgpack",
                                                    "telemetry.msgpack"}));

  // A fresh model and optimizer loaded from the dump equal the state step s started from
  // (bit for bit: parameters, AdamW moments and step counts).
  TwoLayer fresh;
  torch::optim::AdamW fresh_opt(fresh->parameters(), torch::optim::AdamWOptions(1e-2));
  torch::load(fresh, (dir / "model.pt").string());
  torch::load(fresh_opt, (dir / "optimizer.pt").string());
  EXPECT_TRUE(all_identical(keel::test::params_and_adamw_state(*fresh, fresh_opt), rig.seen[s].state_before));
  // ...and not the state after it (the step's own update was applied after the capture).
  EXPECT_TRUE(rig.seen[s].outcome.applied);
  EXPECT_FALSE(all_identical(keel::test::params_and_adamw_state(*fresh, fresh_opt), rig.seen[s + 1].state_before));

  const std::string manifest = read_text(dir / "manifest.json");
  EXPECT_NE(manifest.find("\"step\": " + std::to_string(s)), std::string::npos) << manifest;
  EXPECT_NE(manifest.find("\"reason\": \"command\""), std::string::npos) << manifest;
  const std::string run = read_text(dir / "run.msgpack");
  const auto description = keel::wire::decode(run.data(), run.size());
  ASSERT_TRUE(description.ok) << description.error;
  EXPECT_EQ(std::get<keel::wire::RunDescription>(description.message).layers.size(), 4u);

  // The writer's result comes back as an event carrying the dump's step.
  const auto* reported = step_until_event(rig, "dump");
  ASSERT_TRUE(reported);
  EXPECT_EQ(reported->step, s);
  EXPECT_NE(reported->detail.find(dir.string()), std::string::npos) << reported->detail;
}

TEST(Dump, CommandedDumpsAreRateLimited) {
  TempDir tmp("dump-rate");
  keel::probe::ProbeOptions options = dumping_into(tmp.path());
  options.dump_min_interval_secs = 60;
  Rig rig(options);
  rig.step();
  Client client(rig.probe.bound_command_endpoint());
  client.send(command(1, "dump"));
  ASSERT_TRUE(rig.step_until_ack(client).ok);
  client.send(command(2, "dump"));
  const Ack second = rig.step_until_ack(client);
  EXPECT_FALSE(second.ok);
  EXPECT_EQ(second.step, -1);
  EXPECT_NE(second.error.find("limited to one every"), std::string::npos) << second.error;
  EXPECT_EQ(directory_entries(tmp.path()).size(), 1u);
}

// Dumps stop at dump_max_count, whoever asks: the next command is refused with the reason,
// nothing more is written, and training goes on.
TEST(Dump, DumpsStopAtTheirCountAndTrainingGoesOn) {
  TempDir tmp("dump-count");
  keel::probe::ProbeOptions options = dumping_into(tmp.path());
  options.dump_min_interval_secs = 0;
  options.dump_max_count = 2;
  Rig rig(options);
  rig.step();
  Client client(rig.probe.bound_command_endpoint());
  for (uint64_t id = 1; id <= 2; ++id) {
    client.send(command(id, "dump"));
    const Ack ack = rig.step_until_ack(client);
    ASSERT_TRUE(ack.ok) << "dump " << id << ": " << ack.error;
  }
  client.send(command(3, "dump"));
  const Ack third = rig.step_until_ack(client);
  EXPECT_FALSE(third.ok);
  EXPECT_EQ(third.step, -1);
  EXPECT_NE(third.error.find("dump_max_count"), std::string::npos) << third.error;
  EXPECT_EQ(directory_entries(tmp.path()).size(), 2u);
  for (const auto& [step, seen] : rig.seen) EXPECT_TRUE(seen.outcome.applied) << "step " << step;
}

// A blow-up that starts while a commanded dump is still being written is dumped as well: its
// dump waits behind the other one, since the state before a blow-up cannot be taken later.
TEST(Dump, ABlowUpWhileACommandedDumpIsBeingWrittenIsStillDumped) {
  TempDir tmp("dump-behind");
  keel::probe::ProbeOptions options = dumping_into(tmp.path());
  options.dump_min_interval_secs = 0;
  Rig rig(options);
  rig.step();
  Client client(rig.probe.bound_command_endpoint());
  client.send(command(1, "dump"));
  // Loopback delivers the command well within this; the next step boundary takes it.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const int64_t commanded = static_cast<int64_t>(rig.seen.size());
  rig.step();
  rig.step(/*nan=*/true);   // a few fsyncs take far longer than a step of this model
  const Ack ack = rig.step_until_ack(client);
  ASSERT_TRUE(ack.ok) << ack.error;
  ASSERT_EQ(ack.step, commanded) << "the command was not taken at the step after it was sent";
  EXPECT_FALSE(rig.seen[commanded + 1].outcome.applied);

  // Counted over every step so far: on a loaded machine a dump's result can come back while
  // step_until_ack is still stepping (an ASan CI run once saw both there, and none after).
  const auto dumps_written = [&rig] {
    int n = 0;
    for (const auto& [step, seen] : rig.seen) {
      for (const auto& e : seen.events) n += e.kind == "dump";
    }
    return n;
  };
  int written = dumps_written();
  for (int i = 0; i < kStepsForADump && written < 2; ++i) {
    rig.step();
    written = dumps_written();
    // 300 steps without a pause once outran the two dumps' fsyncs in CI, with builds beside it.
    if (written < 2) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(written, 2) << "the two dumps were not written within 30 s";
  for (const auto& [step, seen] : rig.seen) {
    for (const auto& e : seen.events) EXPECT_NE(e.kind, "dump_failed") << "step " << step << ": " << e.detail;
  }
  const std::string blown_up = "step-" + std::to_string(commanded + 1) + "-nonfinite";
  ASSERT_EQ(directory_entries(tmp.path()),
            (std::vector<std::string>{"step-" + std::to_string(commanded) + "-command", blown_up}));
  TwoLayer fresh;
  torch::optim::AdamW fresh_opt(fresh->parameters(), torch::optim::AdamWOptions(1e-2));
  torch::load(fresh, (tmp.path() / blown_up / "model.pt").string());
  torch::load(fresh_opt, (tmp.path() / blown_up / "optimizer.pt").string());
  EXPECT_TRUE(all_identical(keel::test::params_and_adamw_state(*fresh, fresh_opt), rig.seen[commanded + 1].state_before));
}

TEST(Dump, AnInjectedNanDumpsExactlyOnce) {
  TempDir tmp("dump-nan");
  Rig rig(dumping_into(tmp.path()));   // dump_nonfinite_every: 1000 steps
  for (int i = 0; i < 3; ++i) rig.step();
  for (int i = 0; i < 3; ++i) rig.step(/*nan=*/true);   // one episode of three NaN steps
  for (int i = 0; i < 3; ++i) rig.step();
  rig.step(/*nan=*/true);                              // a second episode, within 1000 steps
  ASSERT_TRUE(step_until_event(rig, "dump")) << "the automatic dump never finished";
  for (int i = 0; i < 20; ++i) rig.step();
  EXPECT_EQ(directory_entries(tmp.path()), std::vector<std::string>{"step-3-nonfinite"});
  int dump_events = 0;
  for (const auto& [step, seen] : rig.seen) {
    for (const auto& e : seen.events) dump_events += e.kind == "dump" || e.kind == "dump_failed";
  }
  EXPECT_EQ(dump_events, 1);
  // The state dumped is the one the NaN step started from, before its (skipped) update.
  TwoLayer fresh;
  torch::optim::AdamW fresh_opt(fresh->parameters(), torch::optim::AdamWOptions(1e-2));
  torch::load(fresh, (tmp.path() / "step-3-nonfinite" / "model.pt").string());
  torch::load(fresh_opt, (tmp.path() / "step-3-nonfinite" / "optimizer.pt").string());
  EXPECT_TRUE(all_identical(keel::test::params_and_adamw_state(*fresh, fresh_opt), rig.seen[3].state_before));
}

// Ranks of one job share the dump directory and all see the same all-reduced NaN: each dump's
// name says its rank, instead of one rank winning the name and the others getting "-2".
TEST(Dump, ARanksDumpIsNamedAfterItsRank) {
  TempDir tmp("dump-rank");
  keel::probe::ProbeOptions options = dumping_into(tmp.path());
  options.world_size = 4;
  options.rank = 2;
  Rig rig(options);
  rig.step();
  rig.step(/*nan=*/true);
  ASSERT_TRUE(step_until_event(rig, "dump")) << "the automatic dump never finished";
  EXPECT_EQ(directory_entries(tmp.path()), std::vector<std::string>{"step-1-nonfinite-rank2"});
}

// A job resumed from a checkpoint counts on from the step it was taken at: its records and its
// dumps say the real step, not one counted from 0 again.
TEST(Dump, AResumedJobCountsOnFromItsFirstStep) {
  TempDir tmp("dump-resumed");
  keel::probe::ProbeOptions options = dumping_into(tmp.path());
  options.first_step = 40000;
  Rig rig(options);
  rig.step();
  EXPECT_EQ(rig.probe.last_record().step, 40000);
  rig.step(/*nan=*/true);
  EXPECT_EQ(rig.probe.last_record().step, 40001);
  ASSERT_TRUE(step_until_event(rig, "dump")) << "the automatic dump never finished";
  EXPECT_EQ(directory_entries(tmp.path()), std::vector<std::string>{"step-40001-nonfinite"});
}

TEST(Dump, TheDumpNonfinitePolicyCanBeSwitchedOff) {
  TempDir tmp("dump-off");
  Rig rig(dumping_into(tmp.path()));
  rig.step();
  Client client(rig.probe.bound_command_endpoint());
  Command off = command(5, "policy");
  off.policy = "dump_nonfinite";
  off.enable = false;
  client.send(off);
  ASSERT_TRUE(rig.step_until_ack(client).ok);
  rig.step(/*nan=*/true);
  for (int i = 0; i < 5; ++i) rig.step();
  EXPECT_TRUE(directory_entries(tmp.path()).empty());
}

TEST(Dump, AnUnwritableDumpDirectoryIsAnEventAndAnErrorAckAndTrainingGoesOn) {
  TempDir tmp("dump-unwritable");
  std::ofstream(tmp.path() / "file") << "a file where the dump directory should be";
  Rig rig(dumping_into(tmp.path() / "file" / "dumps"));
  rig.step();
  Client client(rig.probe.bound_command_endpoint());
  client.send(command(9, "dump"));
  const Ack ack = rig.step_until_ack(client);
  EXPECT_FALSE(ack.ok);
  EXPECT_EQ(ack.step, -1);
  EXPECT_NE(ack.error.find("cannot create dump directory"), std::string::npos) << ack.error;
  const auto* failed = step_until_event(rig, "dump_failed");
  ASSERT_TRUE(failed);
  EXPECT_NE(failed->detail.find("cannot create dump directory"), std::string::npos) << failed->detail;
  for (const auto& [step, seen] : rig.seen) EXPECT_TRUE(seen.outcome.applied) << "step " << step;
}

// A relative dump directory (keel-demo's default "keel-dumps") is resolved against the
// trainer's working directory, and the ack and the dump event name the absolute path: the
// user reads them in a dashboard or a shell somewhere else and copies the path from there.
TEST(Dump, ARelativeDumpDirectoryIsReportedAsAnAbsolutePath) {
  TempDir tmp("dump-relative");
  InDirectory in_tmp(tmp.path());
  Rig rig(dumping_into("keel-dumps"));
  rig.step();
  Client client(rig.probe.bound_command_endpoint());
  client.send(command(31, "dump"));
  const Ack ack = rig.step_until_ack(client);
  ASSERT_TRUE(ack.ok) << ack.error;
  const fs::path expected = fs::canonical(tmp.path()) / "keel-dumps" / ("step-" + std::to_string(ack.step) + "-command");
  EXPECT_EQ(ack.path, expected.string());
  EXPECT_TRUE(fs::exists(expected / "model.pt"));
  const keel::wire::Event* written = step_until_event(rig, "dump");
  ASSERT_NE(written, nullptr);
  EXPECT_EQ(written->detail.rfind("wrote " + expected.string() + " (", 0), 0u) << written->detail;
}

// The job ends (the probe is destroyed) while the automatic dump of its last step is still
// being written: the dump is finished, and its event still reaches a subscriber, though no
// later step is there to report it.
TEST(Dump, ADumpStillBeingWrittenWhenTheJobEndsIsReportedToSubscribers) {
  TempDir tmp("dump-at-end");
  auto rig = std::make_unique<Rig>(dumping_into(tmp.path()));
  zmq::context_t context{1};
  zmq::socket_t subscriber{context, zmq::socket_type::sub};
  subscriber.set(zmq::sockopt::linger, 0);
  subscriber.set(zmq::sockopt::subscribe, "");
  subscriber.set(zmq::sockopt::rcvtimeo, 10000);
  keel::test::present_users_key(subscriber);
  subscriber.connect(rig->probe.bound_endpoint());
  // Live once the description sent to each new subscriber arrives.
  zmq::message_t topic, payload;
  ASSERT_TRUE(subscriber.recv(topic));
  ASSERT_EQ(topic.to_string(), keel::wire::kTopicRun);
  ASSERT_TRUE(subscriber.recv(payload));

  rig->step();
  rig->step(/*nan=*/true);   // takes the dump in this step; only a later step would report it
  ASSERT_FALSE(Rig::has_event(rig->seen.rbegin()->second, "dump"));
  rig.reset();

  std::vector<std::string> kinds;
  std::string detail;
  while (subscriber.recv(topic)) {
    ASSERT_TRUE(subscriber.recv(payload));
    if (topic.to_string() != keel::wire::kTopicEvent) continue;
    const auto decoded = keel::wire::decode(payload.data(), payload.size());
    ASSERT_TRUE(decoded.ok) << decoded.error;
    const auto& event = std::get<keel::wire::Event>(decoded.message);
    kinds.push_back(event.kind);
    if (event.kind == "dump") {
      detail = event.detail;
      EXPECT_EQ(event.step, 1);
      break;
    }
  }
  EXPECT_NE(detail.find((tmp.path() / "step-1-nonfinite").string()), std::string::npos)
      << "no dump event; events seen: " << ::testing::PrintToString(kinds);
  EXPECT_EQ(directory_entries(tmp.path()), std::vector<std::string>{"step-1-nonfinite"});
}

}  // namespace
