// The dashboard's main part over real loopback sockets: telemetry reaches its model and the
// links reach the views' input; a view's intent reaches the probe, and the id it went out with,
// then each change of its outcome (an ack, a timeout and the late answer after it), comes back
// once in the frames that follow; with --alert-command, a live warning runs the command.
#include "core/app_core.hpp"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fake_command_server.hpp"
#include "keel/wire/vocabulary.hpp"
#include "run_recording.hpp"
#include "test_publisher.hpp"

namespace keel::app {
namespace {

namespace wire = keel::wire;
using test_support::FakeCommandServer;
using test_support::TestPublisher;
using Clock = std::chrono::steady_clock;

using test_support::port_of;

// The telemetry endpoint whose command socket (port + 1) is `server`'s.
std::string telemetry_endpoint_of(const FakeCommandServer& server) {
  return "tcp://127.0.0.1:" + std::to_string(port_of(server.endpoint()) - 1);
}

AppCoreOptions quiet_options() {
  AppCoreOptions options;
  // The test publisher has no command socket to answer a late-attach history request.
  options.receiver.backfill = false;
  return options;
}

CommandIntent skip_intent(const std::string& endpoint) {
  CommandIntent intent;
  intent.control = "skip";
  intent.endpoint = endpoint;
  intent.command.kind = "skip";
  intent.command.count = 1;
  return intent;
}

// Every frame's input until `done` says so or 10 s pass (a frame every 5 ms, as a busy UI).
template <typename Done>
std::vector<FrameInput> frames_until(AppCore& core, Done done) {
  std::vector<FrameInput> inputs;
  const auto give_up = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < give_up) {
    inputs.push_back(core.ingest());
    if (done(inputs)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return inputs;
}

std::vector<CommandStatus> updates_of(const std::vector<FrameInput>& inputs, uint64_t id) {
  std::vector<CommandStatus> updates;
  for (const FrameInput& input : inputs) {
    for (const CommandStatus& status : input.command_updates) {
      if (status.id == id) updates.push_back(status);
    }
  }
  return updates;
}

TEST(AppCore, TelemetryReachesItsModelAndTheLinksReachTheViews) {
  TestPublisher publisher;
  AppCore core({publisher.endpoint()}, quiet_options());
  // PUB drops what it sends before the subscription is live: the description is repeated.
  const std::vector<FrameInput> inputs = frames_until(core, [&](const std::vector<FrameInput>&) {
    publisher.send(test_support::sample_run());
    publisher.send(test_support::sample_step(7));
    return core.model().current_run(0) != nullptr && core.model().current_run(0)->has_steps();
  });
  const RunModel* run = core.model().current_run(0);
  ASSERT_NE(run, nullptr) << "no telemetry reached the model";
  ASSERT_TRUE(run->has_steps());
  EXPECT_EQ(run->last_step(), 7);
  // ingested() holds what the last frame took, and the model took the same.
  bool last_frame_had_the_step = false;
  for (const wire::Message& message : core.ingested()) {
    const auto* step = std::get_if<wire::StepRecord>(&message);
    last_frame_had_the_step = last_frame_had_the_step || (step != nullptr && step->step == 7);
  }
  EXPECT_TRUE(last_frame_had_the_step);
  const FrameInput& input = inputs.back();
  ASSERT_EQ(input.links.size(), 1u);
  EXPECT_EQ(input.links[0].endpoint, publisher.endpoint());
  EXPECT_EQ(input.links[0].state, LinkState::kLive);
  EXPECT_EQ(input.links[0].rank, 0);
  EXPECT_EQ(input.queue_dropped, 0u);
  EXPECT_TRUE(input.sent.empty());
  EXPECT_TRUE(input.command_updates.empty());
}

TEST(AppCore, AnIntentReachesTheProbeAndItsIdThenItsAckComeBackOnce) {
  FakeCommandServer server([](const wire::Command& c) -> std::vector<wire::Message> {
    return {FakeCommandServer::ack_for(c, true, 812)};
  });
  AppCore core({test_support::unused_endpoint()}, quiet_options());
  core.carry_out({skip_intent(telemetry_endpoint_of(server))});

  const FrameInput first = core.ingest();
  ASSERT_EQ(first.sent.size(), 1u);
  const SentCommand& sent = first.sent[0];
  EXPECT_EQ(sent.control, "skip");
  EXPECT_NE(sent.id, 0u);
  EXPECT_EQ(sent.command.id, sent.id);
  EXPECT_EQ(sent.command.kind, "skip");

  std::vector<FrameInput> inputs = frames_until(core, [&](const std::vector<FrameInput>& so_far) {
    return !updates_of(so_far, sent.id).empty();
  });
  inputs.insert(inputs.begin(), first);
  // A few frames more: an outcome already reported is not reported again.
  for (int i = 0; i < 5; ++i) inputs.push_back(core.ingest());

  const std::vector<CommandStatus> updates = updates_of(inputs, sent.id);
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0].state, CommandState::kAcknowledged);
  EXPECT_EQ(updates[0].ack.step, 812);
  for (size_t i = 1; i < inputs.size(); ++i) EXPECT_TRUE(inputs[i].sent.empty()) << "frame " << i;
  ASSERT_EQ(server.received().size(), 1u);
  EXPECT_EQ(server.received()[0].id, sent.id);
  EXPECT_EQ(server.received()[0].kind, "skip");
}

TEST(AppCore, ATimedOutCommandIsFollowedUntilItsLateAnswer) {
  // The probe answers only after the dashboard gave up waiting: it did apply the command, and
  // the user must see that.
  FakeCommandServer server([](const wire::Command& c) -> std::vector<wire::Message> {
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
    return {FakeCommandServer::ack_for(c, true, 40)};
  });
  AppCoreOptions options = quiet_options();
  options.commands.timeout_secs = 0.15;
  AppCore core({test_support::unused_endpoint()}, options);
  core.carry_out({skip_intent(telemetry_endpoint_of(server))});
  const FrameInput first = core.ingest();
  ASSERT_EQ(first.sent.size(), 1u);
  const uint64_t id = first.sent[0].id;

  const std::vector<FrameInput> inputs = frames_until(core, [&](const std::vector<FrameInput>& so_far) {
    const std::vector<CommandStatus> updates = updates_of(so_far, id);
    return !updates.empty() && updates.back().answered_late;
  });
  const std::vector<CommandStatus> updates = updates_of(inputs, id);
  ASSERT_EQ(updates.size(), 2u);
  EXPECT_EQ(updates[0].state, CommandState::kTimedOut);
  EXPECT_FALSE(updates[0].answered_late);
  EXPECT_EQ(updates[1].state, CommandState::kAcknowledged);
  EXPECT_TRUE(updates[1].answered_late);
  EXPECT_EQ(updates[1].ack.step, 40);
}

TEST(AppCore, AnIntentForAnEndpointWithNoCommandSocketComesBackRefused) {
  AppCore core({test_support::unused_endpoint()}, quiet_options());
  core.carry_out({skip_intent("ipc-without-a-port")});
  const std::vector<FrameInput> inputs = frames_until(core, [](const std::vector<FrameInput>& so_far) {
    return !so_far.back().command_updates.empty();
  });
  ASSERT_FALSE(inputs.empty());
  ASSERT_EQ(inputs.front().sent.size(), 1u);
  const std::vector<CommandStatus> updates = updates_of(inputs, inputs.front().sent[0].id);
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0].state, CommandState::kRefused);
  EXPECT_FALSE(updates[0].error.empty());
}

// The dashboard attached late to a run (the ring gave it steps from 900 on) reads the rest
// from the run's own recording: the run then holds every step from 0, the live steps that
// arrived while the file was read included, and goes on live.
TEST(AppCore, ALiveRunReadBackFromItsRecordingHoldsItsWholeHistoryAndGoesOnLive) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("keel-app-core-" + std::to_string(::getpid()) + ".keelrec");
  std::filesystem::remove(path);

  TestPublisher publisher;
  AppCore core({publisher.endpoint()}, quiet_options());
  int64_t next = 900;
  const auto publish = [&] {
    publisher.send(test_support::sample_run());
    publisher.send(test_support::run_step(next++));
  };
  frames_until(core, [&](const std::vector<FrameInput>&) {
    publish();
    const RunModel* run = core.model().current_run(0);
    return run != nullptr && run->has_steps();
  });
  ASSERT_GE(core.model().current_run(0)->first_step(), 900);
  // The probe's recording holds every step published so far, as the flight recorder's does.
  test_support::write_run_recording(path.string(), next - 1);

  core.open_recordings({path.string()});
  frames_until(core, [&](const std::vector<FrameInput>& inputs) {
    publish();
    return !inputs.back().recordings.empty() && inputs.back().recordings[0].done;
  });
  // A few more live steps after the file is in.
  const int64_t after = next + 5;
  frames_until(core, [&](const std::vector<FrameInput>&) {
    publish();
    return core.model().current_run(0)->last_step() >= after;
  });
  std::filesystem::remove(path);

  ASSERT_EQ(core.model().run_count(), 1u);
  const RunModel& run = *core.model().current_run(0);
  EXPECT_EQ(run.first_step(), 0);
  EXPECT_GE(run.last_step(), after);
  // Every step from 0 to the newest is there once: the file's (those the subscription lost
  // before it was live included), then the live ones kept while it was read. (A live step
  // still in flight when the file came in is in the file too: refused as a duplicate.)
  EXPECT_EQ(run.counters().steps_stored, static_cast<uint64_t>(run.last_step() + 1));
}

// keel --alert-command: the live messages reach the Alerter, which runs the command with the
// warning's JSON off the UI thread; a run read from a file is history and alerts nobody.
TEST(AppCore, ALiveWarningRunsTheAlertCommandAndARecordingAlertsNobody) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("keel-app-core-alerts-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::filesystem::path recording = dir / "history.keelrec", alerts = dir / "alerts.jsonl";
  std::filesystem::remove(alerts);
  test_support::RunSpec spec;
  spec.event_steps = {3};   // a first_nonfinite, which would alert were it live
  test_support::write_run_recording(recording.string(), 10, spec);

  TestPublisher publisher;
  AppCoreOptions options = quiet_options();
  options.alerts.command = "cat >> '" + alerts.string() + "'";
  std::mutex said_mutex;
  std::string said;
  options.alert_sinks.alert = [&](const std::string& line) {
    std::lock_guard<std::mutex> lock(said_mutex);
    said += line + "\n";
  };
  options.recordings = {recording.string()};
  AppCore core({publisher.endpoint()}, options);
  frames_until(core, [&](const std::vector<FrameInput>& inputs) {
    return !inputs.back().recordings.empty() && inputs.back().recordings[0].done;
  });
  wire::Event warning = test_support::run_event(20);
  warning.kind = wire::event_kind::kWarning;
  warning.warning = wire::Warning{"grad_norm", 5.0, 1.0, 0.1, 12, "lower the learning rate"};
  std::vector<std::string> lines;
  frames_until(core, [&](const std::vector<FrameInput>&) {
    publisher.send(test_support::sample_run());
    publisher.send(warning);
    std::ifstream in(alerts);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return !lines.empty();
  });
  ASSERT_FALSE(lines.empty()) << "the alert command did not run";
  const nlohmann::json json = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(json["kind"], "warning");
  EXPECT_EQ(json["warning"]["lead_steps"], 12);
  std::lock_guard<std::mutex> lock(said_mutex);
  EXPECT_EQ(said.find("alert warning step 20 rank 0 run demo-run"), 0u) << said;
  EXPECT_EQ(said.find("first_nonfinite"), std::string::npos) << "the recording's event is history:\n" << said;
}

}  // namespace
}  // namespace keel::app
