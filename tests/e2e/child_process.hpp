// ChildProcess and free loopback ports, for e2e tests that drive the real binaries.
//
// What it is for: starting keel-demo, keel or keel-cli with stdout and stderr on one pipe,
// waiting for a line that says something happened, and stopping the process at the end.
// Threads: the test thread.
#pragma once

#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace keel::e2e {

// The CPU priority for a trainer that feeds a GUI test. On a 2-core machine two keel-demos at
// full speed starve Xvfb and the app: clicks sent by xdotool reached the app after up to 11 s,
// and 3 of 10 never did (measured with two demos, as ranks_gui_test runs them). At the lowest
// priority every click was seen within 30 ms. The trainer only supplies data there; the test
// is of the dashboard.
constexpr int kBackgroundNiceness = 19;

class ChildProcess {
 public:
  // `niceness` is added to the child's (nice(2)) before it runs argv.
  explicit ChildProcess(const std::vector<std::string>& argv, int niceness = 0) {
    int fds[2];
    if (pipe(fds) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], 1);
      dup2(fds[1], 2);
      close(fds[0]);
      close(fds[1]);
      if (niceness != 0 && nice(niceness) == -1) _exit(126);
      std::vector<char*> args;
      for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
    close(fds[1]);
    fd_ = fds[0];
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess() {
    stop();
    if (fd_ >= 0) close(fd_);
  }

  // Waits for a line containing `needle` and returns it; "" on timeout or end of output.
  std::string wait_for(const std::string& needle, double timeout_secs) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_secs);
    while (std::chrono::steady_clock::now() < deadline) {
      size_t newline;
      while ((newline = buffer_.find('\n')) != std::string::npos) {
        std::string line = buffer_.substr(0, newline);
        buffer_.erase(0, newline + 1);
        output_ += line + "\n";
        if (line.find(needle) != std::string::npos) return line;
      }
      pollfd item{fd_, POLLIN, 0};
      if (poll(&item, 1, 100) <= 0) continue;
      char chunk[4096];
      const ssize_t got = read(fd_, chunk, sizeof chunk);
      if (got <= 0) return "";
      buffer_.append(chunk, size_t(got));
    }
    return "";
  }
  // Like wait_for, but a line read by an earlier wait (which skipped it) counts too: for
  // lines whose order against the one waited for before is not fixed.
  std::string find_or_wait_for(const std::string& needle, double timeout_secs) {
    const size_t at = output_.find(needle);
    if (at != std::string::npos) {
      const size_t begin = output_.rfind('\n', at);
      const size_t start = begin == std::string::npos ? 0 : begin + 1;
      return output_.substr(start, output_.find('\n', at) - start);
    }
    return wait_for(needle, timeout_secs);
  }
  bool alive() const { return pid_ > 0 && waitpid(pid_, nullptr, WNOHANG) == 0; }
  pid_t pid() const { return pid_; }
  // Waits for the process to end by itself; its exit status, -1 when it did not exit normally.
  int wait_exit() {
    int status = 0;
    if (pid_ > 0 && waitpid(pid_, &status, 0) == pid_) pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  // Every line read so far (by wait_for).
  const std::string& output() const { return output_; }

  // SIGKILL: the process ends at once, wherever it is (a crash, the OOM killer).
  void kill_now() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

  void stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  std::string buffer_;
  std::string output_;
};

// Runs a shell command and returns its stdout without the trailing newline (xdotool ids).
inline std::string run_command(const std::string& command) {
  std::string out;
  if (FILE* pipe = popen(command.c_str(), "r")) {
    char chunk[256];
    while (std::fgets(chunk, sizeof chunk, pipe)) out += chunk;
    pclose(pipe);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

// Binds a loopback port (the kernel picks it when `port` is 0); returns it, or -1.
inline int bind_loopback_port(int port, int* fd_out) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  *fd_out = fd;
  return ntohs(addr.sin_port);
}

// A port P such that P and P + 1 (the probe's command socket) are both free right now.
inline int free_port_pair() {
  for (int attempt = 0; attempt < 50; ++attempt) {
    int a = -1, b = -1;
    const int port = bind_loopback_port(0, &a);
    const bool pair = port > 0 && port < 65535 && bind_loopback_port(port + 1, &b) == port + 1;
    if (port > 0) close(a);
    if (pair) {
      close(b);
      return port;
    }
  }
  return -1;
}

}  // namespace keel::e2e
