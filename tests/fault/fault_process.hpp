// FaultProcess: a child process (keel-demo, keel, keel-cli) that a fault test can freeze,
// kill and watch.
//
// What it is for: the fault harness signals its children (SIGSTOP, SIGCONT, SIGKILL), reads
// their resident memory and greps their output afterwards. Output goes to a file, not a pipe:
// a frozen or busy harness must never make a child block on a full pipe, since that would be
// a fault of the harness rather than the one injected. (tests/e2e/child_process.hpp reads a
// pipe and hides the pid, which is right for its tests and not for these.)
// Threads: one owner thread; pid() and rss_kib() may be called from any thread.
// Never: leaves a child behind; the destructor ends it (SIGTERM, then SIGKILL) and reaps it.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace keel::fault {

// VmRSS of a process in KiB, or -1 when it is gone.
inline long rss_kib(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class FaultProcess {
 public:
  // Starts argv[0] (an absolute path) with stdout and stderr appended to `log_path`.
  FaultProcess(const std::vector<std::string>& argv, std::string log_path)
      : log_path_(std::move(log_path)) {
    pid_ = fork();
    if (pid_ == 0) {
      const int fd = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
      }
      std::vector<char*> args;
      for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
  }
  FaultProcess(const FaultProcess&) = delete;
  FaultProcess& operator=(const FaultProcess&) = delete;
  ~FaultProcess() { stop(); }

  pid_t pid() const { return pid_; }
  const std::string& log_path() const { return log_path_; }
  std::string output() const { return read_file(log_path_); }

  void signal(int sig) const {
    if (pid_ > 0) kill(pid_, sig);
  }

  // True while the child has not exited (reaps it when it has; exit_status() then tells how).
  bool running() {
    if (pid_ <= 0) return false;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      status_ = status;
      pid_ = -1;
      return false;
    }
    return true;
  }
  int exit_status() const { return status_; }

  // Waits until `needle` appears in the output at least `times` times; false on timeout or
  // when the child exits first.
  bool wait_for_output(const std::string& needle, double timeout_secs, int times = 1) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_secs);
    while (std::chrono::steady_clock::now() < deadline) {
      if (count_in_output(needle) >= times) return true;
      if (!running()) return count_in_output(needle) >= times;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
  int count_in_output(const std::string& needle) const {
    const std::string text = output();
    int count = 0;
    for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++count;
    return count;
  }

  // SIGTERM (so keel-cli flushes and exits 0), then SIGKILL after `grace_secs`; reaps it.
  void stop(double grace_secs = 5) {
    if (pid_ <= 0) return;
    kill(pid_, SIGCONT);   // a frozen child cannot act on SIGTERM
    kill(pid_, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_secs);
    while (running() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (pid_ > 0) kill_now();
  }

  // SIGKILL and reap: the crash the fault tests inject.
  void kill_now() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, &status_, 0);
    pid_ = -1;
  }

 private:
  std::string log_path_;
  pid_t pid_ = -1;
  int status_ = 0;
};

}  // namespace keel::fault
