// ChildCommands: the commands alerts started (the user's --alert-command, notify-send), each
// followed until it ends and reaped, so none is left a zombie.
//
// What it is for: a command that fails, hangs or is not found must never stop the watcher nor
// hold up what receives telemetry. start() hands the command its input through a memory file
// (memfd) rather than a pipe, so nothing waits for the command to read it; it returns at once.
// poll() reaps the children that ended, saying of each that failed how (its exit status, the
// signal that ended it, the shell's 127 for a command not found), and kills one still running
// past the timeout. Each runs in a process group of its own, so the kill reaches what its shell
// started too (`curl` under `sh -c`). A child's stdout and stderr go to this process's stderr:
// the watcher's stdout stays one alert a line. A child gets the default SIGPIPE and an empty
// signal mask whatever its parent set, and none of the parent's other files.
// Threads: one owner thread (the Alerter's) makes every call.
// Never: waits for a child in start() or poll(); throws.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace keel::app {

class ChildCommands {
 public:
  using Clock = std::chrono::steady_clock;
  using Report = std::function<void(const std::string&)>;
  // Commands running at once, at most: an alert past that is not run (and said), so a burst
  // of alerts with no rate limit cannot fill the process table.
  static constexpr size_t kMaxRunning = 16;

  // `report` is told, one sentence each, of every command that could not start, failed, or was
  // killed.
  ChildCommands(double timeout_secs, Report report);
  ChildCommands(const ChildCommands&) = delete;
  ChildCommands& operator=(const ChildCommands&) = delete;
  // Kills and reaps what still runs (finish() with no grace).
  ~ChildCommands();

  // Starts `argv` (argv[0] an absolute path) with `input` on its standard input (nothing: an
  // empty one). `what` names it in reports ("alert command for warning at step 120 of rank 0").
  // False when it did not start (reported).
  bool start(const std::string& what, const std::vector<std::string>& argv, const std::string& input,
             Clock::time_point now);
  // Reaps each child that ended, reporting the ones that failed; kills each still running past
  // the timeout (reported once reaped).
  void poll(Clock::time_point now);
  // Waits up to `grace` for the children still running, then kills them; reaps every one.
  void finish(std::chrono::milliseconds grace);
  size_t running() const { return children_.size(); }

 private:
  struct Child {
    pid_t pid = -1;
    std::string what;
    Clock::time_point started;
    bool killed_for_time = false;
  };
  // Reaps `child` if it ended (blocking: waits for it); true when it was reaped.
  bool reap(Child& child, bool block);

  std::chrono::duration<double> timeout_;
  Report report_;
  std::vector<Child> children_;
};

}  // namespace keel::app
