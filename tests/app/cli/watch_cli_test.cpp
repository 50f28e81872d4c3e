// `keel-cli watch` as a user runs it: the real binary, subscribed over loopback to a test
// publisher standing in for a probe, running real commands through /bin/sh. What a user relies
// on: each alerting kind runs the command once with the event's JSON, a webhook gets it over
// HTTP with curl, a burst is one alert and the next says how many were held back, a command
// that fails, is missing or hangs never stops the alerts, and a run that stops is one "silent".
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "background_publisher.hpp"
#include "cli_process.hpp"
#include "keel/wire/vocabulary.hpp"
#include "test_publisher.hpp"

namespace keel::app {
namespace {

namespace fs = std::filesystem;
namespace kinds = wire::event_kind;
using namespace std::chrono_literals;
using test_support::BackgroundPublisher;
using test_support::CliProcess;
using test_support::TestPublisher;
using Json = nlohmann::json;

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("keel-watch-cli-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path path = dir / name;
  fs::remove_all(path);
  return path;
}

std::vector<std::string> lines_of_file(const fs::path& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Waits until `path` holds at least `count` lines; returns them.
std::vector<std::string> wait_for_lines(const fs::path& path, size_t count, std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  std::vector<std::string> lines = lines_of_file(path);
  while (lines.size() < count && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(20ms);
    lines = lines_of_file(path);
  }
  return lines;
}

// A probe's stand-in for the watcher: its run described every 10th cycle, a step every cycle
// while it steps, and the events a test queues, in order, each with the next sequence number.
class FakeRun {
 public:
  FakeRun() : publisher_([this](TestPublisher& publisher, int cycle) { publish(publisher, cycle); }) {}

  const std::string& endpoint() const { return publisher_.endpoint(); }
  void send(wire::Event event) {
    event.run = "demo-run";
    std::lock_guard<std::mutex> lock(mutex_);
    queued_.push_back(std::move(event));
  }
  // A trainer that died or hung: no step and no event, while its publisher thread still
  // re-sends the description (which is not a sign of life).
  void stop_stepping() { stepping_.store(false); }
  void step_again() { stepping_.store(true); }
  int64_t last_step() const { return last_step_.load(); }

 private:
  void publish(TestPublisher& publisher, int cycle) {
    if (cycle % 10 == 0) {
      wire::RunDescription run = test_support::sample_run();
      run.seq = seq_++;
      publisher.send(run);
    }
    if (stepping_.load()) {
      wire::StepRecord step = test_support::sample_step(next_step_);
      step.run = "demo-run";
      step.seq = seq_++;
      publisher.send(step);
      last_step_.store(next_step_++);
    }
    std::lock_guard<std::mutex> lock(mutex_);
    for (wire::Event& event : queued_) {
      event.seq = seq_++;
      publisher.send(event);
    }
    queued_.clear();
  }

  std::mutex mutex_;
  std::deque<wire::Event> queued_;
  std::atomic<bool> stepping_{true};
  std::atomic<int64_t> last_step_{-1};
  int64_t next_step_ = 0;   // the publisher thread's
  uint64_t seq_ = 1;        // the publisher thread's
  BackgroundPublisher publisher_;   // last: its thread uses the members above
};

wire::Event event_of(const std::string& kind, int64_t step, const std::string& detail) {
  wire::Event event;
  event.step = step;
  event.kind = kind;
  event.detail = detail;
  return event;
}

wire::Event warning_event(int64_t step) {
  wire::Event event = event_of(kinds::kWarning, step,
                               "update ratio / lr of blocks.0.attn.qkv.weight 2.6x its baseline 0.031 and rising 4% a "
                               "step: the run may diverge in ~35 steps; lower the learning rate or lengthen the warmup");
  event.layer = "blocks.0.attn.qkv.weight";
  event.warning = wire::Warning{"update_ratio", 0.0806, 0.031, 0.04, 35, "lower the learning rate or lengthen the warmup"};
  return event;
}

// Starts `watch` on `run` with `args` and waits until it hears the run's steps (its
// subscription is live: what is published from now on reaches it).
std::unique_ptr<CliProcess> watcher_of(const FakeRun& run, std::vector<std::string> args,
                                       const std::vector<std::string>& environment = {}) {
  args.insert(args.begin(), {"watch", "--endpoint", run.endpoint()});
  auto watcher = std::make_unique<CliProcess>(args, environment);
  EXPECT_TRUE(watcher->started());
  // The probe stand-in takes no history request: the live stream is held the 2 s it waits.
  EXPECT_NE(watcher->wait_for_stderr("keel-cli: hearing rank 0 of run demo-run", 20s), "")
      << watcher->read_stderr(100ms);
  return watcher;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(WatchCli, EachAlertingKindRunsTheCommandOnceWithTheEventAsJson) {
  FakeRun run;
  const fs::path out = scratch("alerts.jsonl");
  // The command's own output goes to stderr: the watcher's stdout stays one alert a line.
  auto watcher = watcher_of(run, {"--alert-command", "cat >> '" + out.string() + "'; echo noise-from-the-command"});
  run.send(warning_event(120));
  wire::Event nonfinite = event_of(kinds::kFirstNonfinite, 130, "non-finite gradient values, in 1 layer");
  nonfinite.layer = "fc1.weight";
  nonfinite.cause = wire::Cause{"forward", "aten::log", "fc1", "log of 0", "NaN born in the forward pass"};
  run.send(nonfinite);
  run.send(event_of(kinds::kSkip, 130, "non-finite gradient values"));   // not an alert
  run.send(event_of(kinds::kRewind, 131, "rewound from step 131 to step 100 (the rewind policy)"));
  run.send(event_of(kinds::kSpike, 140, "grad norm 9.1 is 7 sigma above the window"));   // nor this
  run.send(event_of(kinds::kRewindStopped, 150, "diverged again after 3 rewinds (rewind_max)"));

  const std::vector<std::string> lines = wait_for_lines(out, 4, 20s);
  ASSERT_EQ(lines.size(), 4u) << watcher->read_stderr(100ms);
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(lines_of_file(out).size(), 4u) << "a skip or a spike alerts nobody";
  std::vector<std::string> kinds_seen;
  for (const std::string& line : lines) {
    const Json json = Json::parse(line);
    kinds_seen.push_back(json["kind"]);
    EXPECT_EQ(json["type"], "event") << line;
    EXPECT_EQ(json["run"], "demo-run") << line;
    EXPECT_EQ(json["suppressed"], 0) << line;
    if (json["kind"] == "warning") {
      EXPECT_EQ(json["step"], 120);
      EXPECT_EQ(json["layer"], "blocks.0.attn.qkv.weight");
      EXPECT_EQ(json["warning"]["signal"], "update_ratio");
      EXPECT_DOUBLE_EQ(json["warning"]["value"].get<double>(), 0.0806);
      EXPECT_DOUBLE_EQ(json["warning"]["baseline"].get<double>(), 0.031);
      EXPECT_DOUBLE_EQ(json["warning"]["per_step"].get<double>(), 0.04);
      EXPECT_EQ(json["warning"]["lead_steps"], 35);
      EXPECT_EQ(json["warning"]["advice"], "lower the learning rate or lengthen the warmup");
    }
    if (json["kind"] == "first_nonfinite") {
      EXPECT_EQ(json["cause"]["kind"], "forward");
    }
  }
  // The commands run side by side: the file has them in the order they finished.
  std::sort(kinds_seen.begin(), kinds_seen.end());
  EXPECT_EQ(kinds_seen, (std::vector<std::string>{"first_nonfinite", "rewind", "rewind_stopped", "warning"}));

  std::vector<std::string> printed;
  std::string line;
  while (printed.size() < 4 && watcher->read_line(line, 5s)) printed.push_back(line);
  ASSERT_EQ(printed.size(), 4u);
  EXPECT_EQ(printed[0],
            "alert warning step 120 rank 0 run demo-run layer blocks.0.attn.qkv.weight: update ratio / lr of "
            "blocks.0.attn.qkv.weight 2.6x its baseline 0.031 and rising 4% a step: the run may diverge in ~35 steps; "
            "lower the learning rate or lengthen the warmup");
  EXPECT_EQ(printed[1].find("alert first_nonfinite step 130 rank 0 run demo-run layer fc1.weight: non-finite"), 0u)
      << printed[1];
  EXPECT_EQ(printed[2].find("alert rewind step 131 rank 0 run demo-run: rewound from step 131"), 0u) << printed[2];
  EXPECT_EQ(printed[3].find("alert rewind_stopped step 150 rank 0 run demo-run: diverged again"), 0u) << printed[3];
  for (const std::string& alert : printed) EXPECT_FALSE(contains(alert, "noise")) << alert;
  EXPECT_TRUE(contains(watcher->read_stderr(500ms), "noise-from-the-command"));
}

// One HTTP request on loopback, as a webhook receives it: the request line, and the body read
// by its Content-Length. Answers 200.
class OneRequestServer {
 public:
  OneRequestServer() {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 || ::listen(listener_, 1) != 0 ||
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      return;
    }
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~OneRequestServer() {
    if (thread_.joinable()) thread_.join();
    ::close(listener_);
  }
  int port() const { return port_; }
  // Waits for the request (at most 20 s, the server's own bound); its request line and body.
  void wait(std::string& request_line, std::string& body) {
    if (thread_.joinable()) thread_.join();
    request_line = request_.substr(0, request_.find("\r\n"));
    const size_t end = request_.find("\r\n\r\n");
    body = end == std::string::npos ? "" : request_.substr(end + 4);
  }

 private:
  void serve() {
    pollfd waiting{listener_, POLLIN, 0};
    if (::poll(&waiting, 1, 20000) <= 0) return;
    const int client = ::accept(listener_, nullptr, nullptr);
    size_t body_bytes = 0;
    for (char chunk[4096];;) {
      pollfd readable{client, POLLIN, 0};
      if (::poll(&readable, 1, 10000) <= 0) break;
      const ssize_t got = ::recv(client, chunk, sizeof chunk, 0);
      if (got <= 0) break;
      request_.append(chunk, size_t(got));
      const size_t end = request_.find("\r\n\r\n");
      if (end == std::string::npos) continue;
      const size_t length = request_.find("Content-Length: ");
      if (length != std::string::npos && length < end) body_bytes = std::stoul(request_.substr(length + 16));
      if (request_.size() >= end + 4 + body_bytes) break;
    }
    const std::string answer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
    (void)::send(client, answer.data(), answer.size(), MSG_NOSIGNAL);
    ::close(client);
  }

  int listener_ = -1;
  int port_ = 0;
  std::string request_;   // the server thread's until wait() joins it
  std::thread thread_;
};

TEST(WatchCli, ACommandPostsTheAlertToALocalHttpEndpointWithCurl) {
  ASSERT_EQ(std::system("command -v curl > /dev/null"), 0) << "curl is needed (scripts/install-deps.sh installs it)";
  OneRequestServer webhook;
  ASSERT_GT(webhook.port(), 0);
  FakeRun run;
  auto watcher = watcher_of(run, {"--alert-command",
                                  "curl -sS --max-time 10 -H 'Content-Type: application/json' --data-binary @- "
                                  "http://127.0.0.1:" + std::to_string(webhook.port()) + "/keel-alert"});
  run.send(warning_event(200));
  std::string request_line, body;
  webhook.wait(request_line, body);
  EXPECT_EQ(request_line, "POST /keel-alert HTTP/1.1");
  ASSERT_FALSE(body.empty()) << watcher->read_stderr(100ms);
  const Json json = Json::parse(body);
  EXPECT_EQ(json["kind"], "warning");
  EXPECT_EQ(json["step"], 200);
  EXPECT_EQ(json["warning"]["signal"], "update_ratio");
  EXPECT_EQ(json["warning"]["lead_steps"], 35);
  // A webhook's URL is often its secret: the watcher never prints its command.
  const std::string err = watcher->read_stderr(300ms);
  EXPECT_TRUE(contains(err, "each runs the alert command")) << err;
  EXPECT_FALSE(contains(err, "/keel-alert")) << err;
}

TEST(WatchCli, ABurstOfWarningsRunsTheCommandOnceAndTheNextSaysHowManyWereHeldBack) {
  FakeRun run;
  const fs::path out = scratch("burst.jsonl");
  auto watcher = watcher_of(run, {"--alert-command", "cat >> '" + out.string() + "'", "--alert-interval", "3"});
  for (int64_t step = 300; step < 305; ++step) run.send(warning_event(step));
  ASSERT_EQ(wait_for_lines(out, 1, 20s).size(), 1u) << watcher->read_stderr(100ms);
  const auto first_alert = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(1500ms);
  EXPECT_EQ(lines_of_file(out).size(), 1u) << "the burst is one run of the command";
  std::this_thread::sleep_until(first_alert + 3500ms);
  run.send(warning_event(400));
  const std::vector<std::string> lines = wait_for_lines(out, 2, 20s);
  ASSERT_EQ(lines.size(), 2u) << watcher->read_stderr(100ms);
  EXPECT_EQ(Json::parse(lines[0])["step"], 300);
  EXPECT_EQ(Json::parse(lines[0])["suppressed"], 0);
  EXPECT_EQ(Json::parse(lines[1])["step"], 400);
  EXPECT_EQ(Json::parse(lines[1])["suppressed"], 4) << "the four held back are said";
  std::string line;
  ASSERT_TRUE(watcher->read_line(line, 5s));
  ASSERT_TRUE(watcher->read_line(line, 5s));
  EXPECT_TRUE(contains(line, "(4 more held back since the last)")) << line;
}

// This process's children that are zombies, from /proc: `parent`'s unreaped ones.
int zombies_of(pid_t parent) {
  int zombies = 0;
  for (const fs::directory_entry& entry : fs::directory_iterator("/proc")) {
    std::ifstream in(entry.path() / "stat");
    std::string stat;
    std::getline(in, stat);
    const size_t end_of_name = stat.rfind(')');
    char state = 0;
    int of = 0;
    if (end_of_name != std::string::npos && std::sscanf(stat.c_str() + end_of_name + 1, " %c %d", &state, &of) == 2 &&
        of == parent && state == 'Z') {
      ++zombies;
    }
  }
  return zombies;
}

TEST(WatchCli, FailingMissingAndHangingCommandsLeaveTheWatcherReceivingAndAlerting) {
  FakeRun run;
  const fs::path out = scratch("survived.jsonl");
  // A rewind's command fails, a rewind_stopped's is not found, a first_nonfinite's hangs; a
  // warning's writes its alert. The JSON is read by the shell to tell them apart.
  const std::string command = "read -r alert; case \"$alert\" in "
                              "*'\"kind\":\"rewind\"'*) exit 1;; "
                              "*'\"kind\":\"rewind_stopped\"'*) exec keel-no-such-command-anywhere;; "
                              "*'\"kind\":\"first_nonfinite\"'*) sleep 60;; "
                              "esac; echo \"$alert\" >> '" + out.string() + "'";
  auto watcher = watcher_of(run, {"--alert-command", command, "--alert-timeout", "1.5", "--alert-interval", "0"});
  run.send(event_of(kinds::kFirstNonfinite, 10, "non-finite loss"));
  run.send(event_of(kinds::kRewind, 11, "rewound from step 11 to step 5 (a command)"));
  run.send(event_of(kinds::kRewindStopped, 12, "no snapshot from before the divergence"));
  // The hanging command is still running: the next alert is raised and run meanwhile.
  run.send(warning_event(13));
  const std::vector<std::string> lines = wait_for_lines(out, 1, 20s);
  ASSERT_EQ(lines.size(), 1u) << watcher->read_stderr(100ms);
  EXPECT_EQ(Json::parse(lines[0])["kind"], "warning");
  // The three commands end in their own time: their reports come in any order.
  const std::vector<std::string> reports = {
      "keel-cli: alert command for rewind at step 11 of rank 0 exited with status 1\n",
      "keel-cli: alert command for rewind_stopped at step 12 of rank 0 exited with status 127 (the shell found no such "
      "command)\n",
      "keel-cli: alert command for first_nonfinite at step 10 of rank 0 ran longer than 1.5 s and was killed\n"};
  std::string err;
  const auto until = std::chrono::steady_clock::now() + 20s;
  const auto all_said = [&] {
    return std::all_of(reports.begin(), reports.end(), [&](const std::string& r) { return contains(err, r); });
  };
  while (!all_said() && std::chrono::steady_clock::now() < until) err = watcher->read_stderr(200ms);
  EXPECT_TRUE(all_said()) << err;
  // And it goes on: a later alert still runs.
  run.send(warning_event(14));
  const std::vector<std::string> later = wait_for_lines(out, 2, 20s);
  ASSERT_EQ(later.size(), 2u) << watcher->read_stderr(100ms);
  EXPECT_EQ(Json::parse(later[1])["step"], 14);
  // Every command was reaped: none is left a zombie of the watcher.
  int zombies = zombies_of(watcher->pid());
  for (int i = 0; i < 100 && zombies > 0; ++i, std::this_thread::sleep_for(20ms)) zombies = zombies_of(watcher->pid());
  EXPECT_EQ(zombies, 0);
}

TEST(WatchCli, ARunThatStopsSteppingYieldsOneSilentAlert) {
  FakeRun run;
  const fs::path out = scratch("silent.jsonl");
  // No rate limit: the once is the silence's own.
  // 3 s: long enough that a loaded machine's pause in publishing is not taken for a silence.
  auto watcher = watcher_of(run, {"--alert-command", "cat >> '" + out.string() + "'", "--silent-after", "3",
                                  "--alert-interval", "0"});
  run.stop_stepping();
  std::this_thread::sleep_for(100ms);   // a cycle under way when it stopped has sent its step
  const int64_t last_step = run.last_step();
  const std::vector<std::string> lines = wait_for_lines(out, 1, 20s);
  ASSERT_EQ(lines.size(), 1u) << watcher->read_stderr(100ms);
  // Its description still comes every 100 ms: a publisher alive is not a run stepping.
  std::this_thread::sleep_for(3s);
  EXPECT_EQ(lines_of_file(out).size(), 1u) << "once per silence";
  const Json json = Json::parse(lines[0]);
  EXPECT_EQ(json["type"], "watcher") << "the watcher's own kind, not a probe's";
  EXPECT_EQ(json["kind"], "silent");
  EXPECT_EQ(json["rank"], 0);
  EXPECT_EQ(json["run"], "demo-run");
  EXPECT_EQ(json["step"], last_step);
  EXPECT_GE(json["silent_secs"].get<double>(), 3.0);
  EXPECT_TRUE(contains(json["detail"], "no step or event from rank 0 of run demo-run for ")) << json["detail"];
  std::string line;
  ASSERT_TRUE(watcher->read_line(line, 5s));
  EXPECT_EQ(line.find("alert silent step " + std::to_string(last_step) + " rank 0 run demo-run: no step or event"), 0u)
      << line;
  // Stepping again re-arms it: said on stderr, and a second silence is a second alert.
  run.step_again();
  EXPECT_NE(watcher->wait_for_stderr("keel-cli: rank 0 of run demo-run sends again", 20s), "");
  run.stop_stepping();
  EXPECT_EQ(wait_for_lines(out, 2, 20s).size(), 2u);
}

TEST(WatchCli, NotifyRunsNotifySendWhereTheDesktopHasIt) {
  const fs::path bin = scratch("bin");
  fs::create_directories(bin);
  const fs::path shown = scratch("notifications.txt");
  // A notify-send of the test's own that writes down what it was asked to show.
  std::ofstream(bin / "notify-send") << "#!/bin/sh\nprintf '%s|' \"$@\" >> '" << shown.string() << "'\necho >> '"
                                     << shown.string() << "'\n";
  ::chmod((bin / "notify-send").c_str(), 0755);
  FakeRun run;
  auto watcher = watcher_of(run, {"--notify"}, {"DISPLAY=:99", "WAYLAND_DISPLAY", "PATH=" + bin.string() + ":/usr/bin:/bin"});
  run.send(warning_event(500));
  const std::vector<std::string> lines = wait_for_lines(shown, 1, 20s);
  ASSERT_EQ(lines.size(), 1u) << watcher->read_stderr(100ms);
  EXPECT_EQ(lines[0].find("--|keel: warning, rank 0 of demo-run|update ratio / lr of blocks.0.attn.qkv.weight"), 0u)
      << lines[0];
}

TEST(WatchCli, NotifyWithoutADesktopSaysSoOnceAndStillPrintsTheAlerts) {
  FakeRun run;
  auto watcher = watcher_of(run, {"--notify"}, {"DISPLAY", "WAYLAND_DISPLAY"});
  run.send(warning_event(600));
  std::string line;
  ASSERT_TRUE(watcher->read_line(line, 20s));
  EXPECT_EQ(line.find("alert warning step 600"), 0u) << line;
  const std::string err = watcher->read_stderr(500ms);
  EXPECT_TRUE(contains(err, "keel-cli: --notify: no desktop notifier: no desktop session: neither DISPLAY nor "
                            "WAYLAND_DISPLAY is set"))
      << err;
  EXPECT_EQ(err.find("no desktop notifier"), err.rfind("no desktop notifier")) << "said once:\n" << err;
}

TEST(WatchCli, NothingReceivedIsSaidOnceAndTheWatcherWaitsOn) {
  const std::string endpoint = test_support::unused_endpoint();
  CliProcess watcher({"watch", "--endpoint", endpoint, "--silent-after", "0.5"});
  ASSERT_TRUE(watcher.started());
  EXPECT_NE(watcher.wait_for_stderr("keel-cli: nothing received from " + endpoint + " in 0.5 s; still waiting", 10s), "");
  EXPECT_EQ(watcher.wait_exit(1s), -1) << "it waits on: a trainer may start later";
}

TEST(WatchCli, CtrlCEndsTheWatcherWithStatus0AndAnInvalidEndpointWith1) {
  CliProcess watcher({"watch", "--endpoint", test_support::unused_endpoint()});
  ASSERT_TRUE(watcher.started());
  ASSERT_NE(watcher.wait_for_stderr("keel-cli: watching", 10s), "");
  ASSERT_EQ(kill(watcher.pid(), SIGINT), 0);
  EXPECT_EQ(watcher.wait_exit(10s), 0);
  CliProcess invalid({"watch", "--endpoint", "localhost:5557"});
  EXPECT_EQ(invalid.wait_exit(10s), 1);
  EXPECT_TRUE(contains(invalid.read_stderr(1s), "keel-cli:")) << "says why";
}

}  // namespace
}  // namespace keel::app
