// Alerter: alerts raised off the receiving thread, on a thread of their own.
//
// What it is for: `keel-cli watch` and the dashboard's --alert-command share it. The thread
// that receives telemetry (the watcher's loop, the dashboard's UI thread) hands it each batch of
// messages with observe(), which only copies the events of kinds that alert and notes which
// ranks were heard, under a short lock. The Alerter's own thread then applies the policy
// (AlertPolicy: kinds, silences, the rate limit), and for each alert prints its line, starts the
// user's command with the alert's JSON on its standard input (through /bin/sh -c), and the
// desktop notification (--notify), then follows those commands until they end (ChildCommands:
// failures and timeouts said, none left a zombie). A command that fails, hangs or is not found
// costs the receiving thread nothing. At most kMaxQueuedEvents wait for the thread; past that
// the newest are dropped and counted (dropped()), since an alert thread that far behind is
// being flooded, not informed.
// Threads: construct, observe() and destroy from one owner thread; the sinks are called on the
// Alerter's thread, one call at a time.
// Never: blocks observe() on anything but that short lock, or throws after construction.
// Destruction gives commands still running kExitGraceMs to end, then kills them.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "alert/alert_options.hpp"
#include "alert/alert_policy.hpp"
#include "alert/child_commands.hpp"
#include "alert/desktop_notifier.hpp"
#include "keel/wire/messages.hpp"

namespace keel::app {

// Where the Alerter says things, one line each (no newline). Empty: not said.
struct AlertSinks {
  std::function<void(const std::string&)> alert;     // each alert raised (alert_line.hpp)
  std::function<void(const std::string&)> problem;   // a command that failed, was killed or did not start; no notifier
  std::function<void(const std::string&)> note;      // a rank heard first, or again after its silence
};

class Alerter {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kMaxQueuedEvents = 1024;
  static constexpr int kExitGraceMs = 2000;

  // Starts the thread. With --notify and no desktop notifier, says so once on `problem`.
  Alerter(AlertOptions options, AlertSinks sinks);
  Alerter(const Alerter&) = delete;
  Alerter& operator=(const Alerter&) = delete;
  ~Alerter();

  // A batch of received messages, oldest first.
  void observe(const std::vector<wire::Message>& messages);
  uint64_t dropped() const { return dropped_.load(); }

 private:
  struct Received {
    std::vector<wire::Event> events;
    std::map<int32_t, std::pair<SilenceWatch::Heard, Clock::time_point>> heard;   // the newest, by rank
  };
  void run();
  void take(const Received& received);
  void raise(const Alert& alert, Clock::time_point now);
  void say(const std::function<void(const std::string&)>& sink, const std::string& line) const;

  const AlertOptions options_;
  const AlertSinks sinks_;
  AlertPolicy policy_;        // the thread's, but for alerts_on(), which only reads
  ChildCommands commands_;    // the thread's
  std::optional<DesktopNotifier> notifier_;
  std::mutex mutex_;          // guards received_ and stop_
  std::condition_variable wake_;
  Received received_;
  bool stop_ = false;
  std::atomic<uint64_t> dropped_{0};
  std::thread thread_;
};

}  // namespace keel::app
