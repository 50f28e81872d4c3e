#include "fault_scenarios.hpp"

#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <random>
#include <regex>
#include <thread>

#include "command_channel.hpp"
#include "subscriber_flood.hpp"

namespace keel::fault {
namespace {

void sleep_secs(double secs) { std::this_thread::sleep_for(std::chrono::duration<double>(secs)); }

// The app's log line for each late attach (app/net/backfill.cpp): "backfilled N steps (a..b)".
struct BackfillLine {
  int64_t first = -1, last = -1;
};
std::vector<BackfillLine> backfill_lines(const std::string& log) {
  static const std::regex pattern(R"(keel: backfill \S+: backfilled \d+ steps \((\d+)\.\.(\d+)\))");
  std::vector<BackfillLine> out;
  for (std::sregex_iterator it(log.begin(), log.end(), pattern), end; it != end; ++it) {
    out.push_back({std::stoll((*it)[1]), std::stoll((*it)[2])});
  }
  return out;
}
std::string backfill_text(const std::string& log) {
  static const std::regex pattern(R"(keel: backfill [^\n]*)");
  std::string out;
  for (std::sregex_iterator it(log.begin(), log.end(), pattern), end; it != end; ++it) {
    out += (out.empty() ? "" : " | ") + it->str();
  }
  return out;
}

// A flood of requests: as many as the socket takes during `secs`, alternately a valid
// describe and a malformed request, acks read as they come.
void flood_commands(const std::string& command_endpoint, double secs, FaultOutcome& out) {
  CommandChannel channel(command_endpoint);
  std::mt19937 rng(11);
  // A cap only so that a very fast machine cannot queue gigabytes in our own socket.
  constexpr uint64_t kMaxRequests = 2000000;
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(secs);
  for (uint64_t i = 0; i < kMaxRequests && std::chrono::steady_clock::now() < end; ++i) {
    if (i % 2 == 0) {
      wire::Command describe;
      describe.kind = "describe";
      channel.send(describe, 100);
    } else {
      channel.send_garbage(rng, 100);
    }
    if (i % 64 == 0) channel.collect_ready();
  }
  channel.collect(5000);
  const AckTally& tally = channel.tally();
  out.commands_sent = channel.sent_valid() + channel.sent_garbage();
  out.commands_ok = tally.ok;
  out.commands_refused = tally.refused;
  out.commands_unanswered = channel.unanswered();
  out.duplicate_acks = tally.duplicates;
  out.detail = std::to_string(channel.sent_valid()) + " describes, " + std::to_string(channel.sent_garbage()) +
               " malformed; refusals:";
  for (const auto& [reason, count] : tally.refusal_reasons) out.detail += " [" + reason + "] x" + std::to_string(count);
}

}  // namespace

const char* fault_name(Fault fault) {
  switch (fault) {
    case Fault::kClientKilled: return "client (keel-cli tail) SIGKILL, restarted";
    case Fault::kClientFrozen: return "client (keel-cli tail) SIGSTOP, SIGCONT";
    case Fault::kCommandFlood: return "command socket flood (describe + malformed)";
    case Fault::kSubscriberFlood: return "subscriber churn + one never reading";
    case Fault::kHostileSubscriptions: return "5 x 10 MB topic + 10,000 random subscriptions";
    case Fault::kAppKilled: return "dashboard (keel, Xvfb) SIGKILL, restarted";
    case Fault::kAppFrozen: return "dashboard (keel, Xvfb) SIGSTOP, SIGCONT";
    case Fault::kTrainerRestarted: return "trainer SIGKILL, restarted (dashboard watching)";
  }
  return "?";
}

bool fault_needs_app(Fault fault) {
  return fault == Fault::kAppKilled || fault == Fault::kAppFrozen || fault == Fault::kTrainerRestarted;
}

FaultTiming fault_timing(bool long_run) {
  const char* env = std::getenv("KEEL_FAULT_LONG");
  if (long_run || (env && std::string(env) == "1")) return FaultTiming{10, 30, 5};
  return FaultTiming{};
}

namespace {

std::unique_ptr<FaultProcess> start_client(bool app, const Binaries& binaries, const TrainerUnderTest& trainer,
                                           const std::string& log_path) {
  std::vector<std::string> args =
      app ? std::vector<std::string>{binaries.app, "--verbose", "--connect", trainer.endpoint(), "--width", "800",
                                     "--height", "600"}
          // A long timeout: a frozen client must not give up on its own after SIGCONT.
          : std::vector<std::string>{binaries.cli, "tail", "--endpoint", trainer.endpoint(), "--json", "--timeout", "600"};
  if (trainer.unauthenticated()) args.push_back("--no-auth");
  return std::make_unique<FaultProcess>(args, log_path);
}

bool wait_client_ready(bool app, FaultProcess& client) {
  return app ? client.wait_for_output("keel: backfill", 60) : client.wait_for_output("\"type\":\"step\"", 30);
}

FaultOutcome run_trainer_restart(const Binaries& binaries, const FaultTiming& timing) {
  FaultOutcome out;
  out.fault = fault_name(Fault::kTrainerRestarted);
  ScratchDir dir("trainer-restart");
  auto first = std::make_unique<TrainerUnderTest>(binaries, dir, TrainerOptions{}, "demo-1.log");
  if (!first->wait_until_training(120)) {
    out.failure = "keel-demo did not start training";
    return out;
  }
  const int port = first->port();
  const std::string endpoint = first->endpoint();
  FaultProcess app({binaries.app, "--verbose", "--connect", endpoint, "--width", "800", "--height", "600"}, dir.file("app.log"));
  if (!app.wait_for_output("keel: backfill", 60)) {
    out.failure = "the dashboard never attached to the first run: " + app.output().substr(0, 400);
    return out;
  }
  sleep_secs(timing.baseline_secs);
  first->process().kill_now();
  first->stop();
  sleep_secs(timing.fault_secs);
  TrainerOptions options;
  options.port = port;
  TrainerUnderTest second(binaries, dir, options, "demo-2.log");
  // The second run's first message makes the app attach again and backfill it.
  const bool reattached = app.wait_for_output("keel: backfill", 90, 2);
  const int64_t t0 = unix_now_ns();
  sleep_secs(timing.after_secs);
  const int64_t t1 = unix_now_ns();
  const StepLedger ring = second.history("final.jsonl");
  out.trainer_survived = second.process().running();
  out.rss_start_kib = second.rss_at_or_after(t0);
  out.rss_end_kib = second.rss_last();
  out.rss_max_kib = second.rss_max(t0, t1);
  out.fault_step_us = ring.step_time_us(t0, t1);
  out.fault_probe_us = ring.probe_us(t0, t1);
  out.steps_dropped = ring.max_dropped();
  out.longest_gap_secs = ring.longest_gap_secs(t0);
  second.stop();
  sleep_secs(1);
  out.client_survived = app.running();
  const std::string log = app.output();
  out.detail = backfill_text(log);
  if (!reattached) {
    out.client_survived = false;
    out.detail = "no late attach to the new run: " + out.detail;
    return out;
  }
  // The new run is complete in the dashboard when its backfill reaches back to step 0, or,
  // when the backfill added nothing, when the live stream starts at step 0. The app says where
  // it starts ("live from step N") when a live step came before the answer; when none had and
  // the ring was empty, the run had published nothing yet, so its first step arrives live.
  const std::string last_outcome = log.substr(log.rfind("keel: backfill"));
  const std::vector<BackfillLine> lines = backfill_lines(last_outcome);
  static const std::regex live_from(R"(live from step (\d+))");
  std::smatch live_match;
  out.steps_checked = ring.last_step() + 1;
  if (!lines.empty()) {
    out.steps_missing = lines.front().first;
  } else if (std::regex_search(last_outcome, live_match, live_from)) {
    out.steps_missing = std::stoll(live_match[1]);
  } else if (last_outcome.find("the probe's history was empty") == std::string::npos) {
    out.steps_missing = out.steps_checked;   // the backfill failed: the start of the run is not shown
  }
  return out;
}

}  // namespace

FaultOutcome run_fault(Fault fault, const Binaries& binaries, const FaultTiming& timing) {
  if (fault == Fault::kTrainerRestarted) return run_trainer_restart(binaries, timing);
  FaultOutcome out;
  out.fault = fault_name(fault);
  const bool app = fault_needs_app(fault);
  ScratchDir dir("scenario");
  // The hostile clients speak only ZMTP's NULL mechanism: with the defaults the probe refuses
  // them at the handshake, before a byte of a subscription. The bound is tested where it is
  // still needed, on a probe that lets anyone in.
  TrainerOptions trainer_options;
  trainer_options.unauthenticated = fault == Fault::kHostileSubscriptions;
  TrainerUnderTest trainer(binaries, dir, trainer_options);
  if (!trainer.wait_until_training(120)) {
    out.failure = "keel-demo did not start training: " + trainer.process().output().substr(0, 400);
    return out;
  }
  std::vector<std::unique_ptr<FaultProcess>> clients;
  const auto add_client = [&] {
    clients.push_back(start_client(app, binaries, trainer,
                                   dir.file("client-" + std::to_string(clients.size()) + ".log")));
    return wait_client_ready(app, *clients.back());
  };
  if (!add_client()) {
    out.failure = "the client never received a step: " + clients.back()->output().substr(0, 400);
    return out;
  }
  sleep_secs(1);

  const int64_t t0 = unix_now_ns();
  sleep_secs(timing.baseline_secs);
  const int64_t t1 = unix_now_ns();
  StepLedger reattach;
  switch (fault) {
    case Fault::kClientKilled:
    case Fault::kAppKilled:
      clients.back()->kill_now();
      sleep_secs(timing.fault_secs);
      if (!add_client()) out.failure = "the restarted client never received a step";
      // What a restarted client backfills, read from the probe's ring by the harness itself: the
      // ledger's ground truth does not rest on the backfill of the client under test (the
      // dashboard and keel-cli tail both do it).
      if (!app) reattach = trainer.history("reattach.jsonl");
      break;
    case Fault::kClientFrozen:
    case Fault::kAppFrozen:
      clients.back()->signal(SIGSTOP);
      sleep_secs(timing.fault_secs);
      clients.back()->signal(SIGCONT);
      break;
    case Fault::kCommandFlood:
      flood_commands(trainer.command_endpoint(), timing.fault_secs, out);
      break;
    case Fault::kSubscriberFlood: {
      SubscriberFlood flood(trainer.endpoint(), SubscriberFloodOptions{});
      flood.start();
      sleep_secs(timing.fault_secs);
      flood.stop();
      out.detail = std::to_string(flood.subscriptions()) + " subscriptions opened and closed";
      break;
    }
    case Fault::kHostileSubscriptions: {
      SubscriberFloodOptions hostile;
      hostile.churn = false;
      hostile.stalled = false;
      hostile.huge_topic_subscribers = 5;
      hostile.random_subscriptions = 10000;
      SubscriberFlood flood(trainer.endpoint(), hostile);
      flood.start();
      sleep_secs(timing.fault_secs);
      flood.stop();
      out.detail = std::to_string(flood.subscriptions()) + " hostile subscriptions";
      // The probe closes every telemetry connection to shed them, the healthy client's too:
      // what it missed is in the probe's ring, which is what a dashboard backfills from.
      reattach = trainer.history("reattach.jsonl");
      break;
    }
    case Fault::kTrainerRestarted:
      break;
  }
  const int64_t t2 = unix_now_ns();
  sleep_secs(timing.after_secs);

  const StepLedger ring = trainer.history("final.jsonl");
  const int64_t t_end = unix_now_ns();
  out.trainer_survived = trainer.process().running();
  out.rss_start_kib = trainer.rss_at_or_after(t0);
  out.rss_end_kib = trainer.rss_last();
  out.rss_max_kib = trainer.rss_max(t0, t_end);
  out.baseline_step_us = ring.step_time_us(t0, t1);
  out.fault_step_us = ring.step_time_us(t1, t2);
  out.baseline_probe_us = ring.probe_us(t0, t1);
  out.fault_probe_us = ring.probe_us(t1, t2);
  out.steps_dropped = ring.max_dropped();
  out.longest_gap_secs = ring.longest_gap_secs(t0);
  // The clients get what the probe still sends while it shuts down (its socket lingers).
  trainer.stop();
  sleep_secs(0.5);
  out.client_survived = clients.back()->running();
  for (auto& client : clients) client->stop();

  if (app) {
    const std::string log = clients.back()->output();
    out.detail = backfill_text(log);
    const std::vector<BackfillLine> lines = backfill_lines(log);
    if (fault == Fault::kAppKilled && !lines.empty()) {
      // The restarted dashboard's backfill must reach back past the step at which its
      // predecessor died, so the outage has no hole.
      const int64_t killed_at = ring.step_before(t1);
      out.steps_checked = lines.back().last - killed_at + 1;
      out.steps_missing = std::max<int64_t>(0, lines.back().first - killed_at);
    }
    return out;
  }
  std::vector<StepLedger> received(clients.size());
  std::vector<const StepLedger*> sources;
  for (size_t i = 0; i < clients.size(); ++i) {
    received[i].add_json_lines_file(clients[i]->log_path());
    sources.push_back(&received[i]);
  }
  sources.push_back(&reattach);
  const StepLedger seen = merged(sources);
  if (received.front().empty() || ring.empty()) {
    out.failure = "no steps to check";
    return out;
  }
  const int64_t first = received.front().first_step();
  const int64_t last = std::max(ring.last_step(), seen.last_step());
  out.steps_checked = last - first + 1;
  out.steps_missing = int64_t(seen.missing(first, last).size());
  out.steps_dropped = std::max(out.steps_dropped, seen.max_dropped());
  return out;
}

}  // namespace keel::fault
