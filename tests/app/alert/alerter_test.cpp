// The Alerter with its thread and real commands: an observed event becomes a printed line and
// a run of the command with its JSON; a rank that stops becomes one "silent" alert; a flood
// past what the thread can hold is dropped and counted rather than held.
#include "alert/alerter.hpp"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace keel::app {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("keel-alerter-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path path = dir / name;
  fs::remove(path);
  return path;
}

std::vector<std::string> lines_of_file(const fs::path& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// What the Alerter said, from its thread.
class Said {
 public:
  AlertSinks sinks() {
    return AlertSinks{[this](const std::string& l) { add("alert: " + l); },
                      [this](const std::string& l) { add("problem: " + l); },
                      [this](const std::string& l) { add("note: " + l); }};
  }
  // Waits up to `timeout` for a line containing `needle`.
  bool wait_for(const std::string& needle, std::chrono::milliseconds timeout) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < until) {
      if (text().find(needle) != std::string::npos) return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }
  std::string text() {
    std::lock_guard<std::mutex> lock(mutex_);
    return text_;
  }

 private:
  void add(const std::string& line) {
    std::lock_guard<std::mutex> lock(mutex_);
    text_ += line + "\n";
  }
  std::mutex mutex_;
  std::string text_;
};

wire::StepRecord step(int64_t number) {
  wire::StepRecord record;
  record.run = "demo-run";
  record.step = number;
  return record;
}

wire::Event warning_event(int64_t number) {
  wire::Event event;
  event.run = "demo-run";
  event.step = number;
  event.kind = wire::event_kind::kWarning;
  event.detail = "the grad norm is rising";
  event.warning = wire::Warning{"grad_norm", 4.0, 1.0, 0.05, 30, "lower the learning rate"};
  return event;
}

TEST(Alerter, AnObservedWarningIsPrintedAndRunsTheCommandWithItsJson) {
  const fs::path out = scratch("alerts.jsonl");
  AlertOptions options;
  options.command = "cat >> '" + out.string() + "'";
  Said said;
  Alerter alerter(options, said.sinks());
  alerter.observe({step(5), warning_event(6)});
  ASSERT_TRUE(said.wait_for("alert: alert warning step 6 rank 0 run demo-run: the grad norm is rising", 5s))
      << said.text();
  EXPECT_NE(said.text().find("note: hearing rank 0 of run demo-run, step "), std::string::npos) << said.text();
  std::vector<std::string> lines;
  for (int i = 0; i < 500 && lines.empty(); ++i, std::this_thread::sleep_for(10ms)) lines = lines_of_file(out);
  ASSERT_EQ(lines.size(), 1u);
  const nlohmann::json json = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(json["kind"], "warning");
  EXPECT_EQ(json["step"], 6);
  EXPECT_EQ(json["warning"]["signal"], "grad_norm");
  EXPECT_EQ(json["suppressed"], 0);
}

TEST(Alerter, ARankThatStopsIsOneSilentAlert) {
  AlertOptions options;
  options.silent_after_secs = 0.3;
  Said said;
  Alerter alerter(options, said.sinks());
  alerter.observe({step(41), step(42)});
  ASSERT_TRUE(said.wait_for("alert silent step 42 rank 0 run demo-run: no step or event from rank 0", 5s))
      << said.text();
  std::this_thread::sleep_for(800ms);
  const std::string text = said.text();
  EXPECT_EQ(text.find("alert silent"), text.rfind("alert silent")) << "once per silence:\n" << text;
  alerter.observe({step(43)});
  EXPECT_TRUE(said.wait_for("note: rank 0 of run demo-run sends again, step 43", 5s)) << said.text();
}

TEST(Alerter, AFloodPastWhatTheThreadHoldsIsDroppedAndCounted) {
  AlertOptions options;
  options.interval_secs = 0;
  Alerter alerter(options, AlertSinks{});
  std::vector<wire::Message> flood;
  for (int i = 0; i < int(Alerter::kMaxQueuedEvents) + 100; ++i) flood.push_back(warning_event(i));
  alerter.observe(flood);
  EXPECT_GE(alerter.dropped(), 100u);
}

TEST(Alerter, NotifyWithoutADesktopSaysSoOnce) {
  const char* display = std::getenv("DISPLAY");
  const std::string saved = display ? display : "";
  ::unsetenv("DISPLAY");
  const char* wayland = std::getenv("WAYLAND_DISPLAY");
  const std::string saved_wayland = wayland ? wayland : "";
  ::unsetenv("WAYLAND_DISPLAY");
  AlertOptions options;
  options.notify = true;
  Said said;
  {
    Alerter alerter(options, said.sinks());
    alerter.observe({warning_event(1)});
    EXPECT_TRUE(said.wait_for("alert: alert warning", 5s));
  }
  if (display) ::setenv("DISPLAY", saved.c_str(), 1);
  if (wayland) ::setenv("WAYLAND_DISPLAY", saved_wayland.c_str(), 1);
  const std::string text = said.text();
  EXPECT_EQ(text.find("problem: --notify: no desktop notifier: no desktop session"), 0u) << text;
  EXPECT_EQ(text.find("problem:"), text.rfind("problem:")) << "said once:\n" << text;
}

}  // namespace
}  // namespace keel::app
