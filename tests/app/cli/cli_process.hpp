// CliProcess: the real keel-cli binary as a child process, its stdout and stderr on pipes.
//
// What it is for: the CLI tests run keel-cli as a user does and read what it prints, line by
// line, with timeouts so that a test never hangs on a process that says nothing. The child's
// environment is this process's, with the changes a test asks for (a PATH, no DISPLAY).
// Threads: the test thread. The child is killed and reaped when the object goes.
#pragma once

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace keel::app::test_support {

class CliProcess {
 public:
  // `environment`: "NAME=VALUE" sets NAME for the child, a bare "NAME" removes it.
  explicit CliProcess(const std::vector<std::string>& args, const std::vector<std::string>& environment = {}) {
    int out_pipe[2];
    int err_pipe[2];
    if (pipe(out_pipe) != 0 || pipe(err_pipe) != 0) return;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);
    posix_spawn_file_actions_addclose(&actions, out_pipe[0]);
    posix_spawn_file_actions_addclose(&actions, err_pipe[0]);
    std::vector<std::string> argv_strings = {KEEL_CLI_PATH};
    argv_strings.insert(argv_strings.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& arg : argv_strings) argv.push_back(arg.data());
    argv.push_back(nullptr);
    std::vector<std::string> env_strings = environment_with(environment);
    std::vector<char*> env;
    for (std::string& entry : env_strings) env.push_back(entry.data());
    env.push_back(nullptr);
    if (posix_spawn(&pid_, KEEL_CLI_PATH, &actions, nullptr, argv.data(), env.data()) != 0) {
      pid_ = -1;
    }
    posix_spawn_file_actions_destroy(&actions);
    close(out_pipe[1]);
    close(err_pipe[1]);
    out_fd_ = out_pipe[0];
    err_fd_ = err_pipe[0];
  }

  ~CliProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (out_fd_ >= 0) close(out_fd_);
    if (err_fd_ >= 0) close(err_fd_);
  }

  bool started() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }

  // One line of stdout (without '\n'); false on end of file or timeout.
  bool read_line(std::string& line, std::chrono::milliseconds timeout) {
    return next_line(out_fd_, out_buffer_, line, timeout);
  }

  std::vector<std::string> read_all_lines(std::chrono::milliseconds timeout) {
    std::vector<std::string> lines;
    std::string line;
    while (read_line(line, timeout)) lines.push_back(line);
    return lines;
  }

  // Everything on stderr so far: what wait_for_stderr() read, and what arrives within `timeout`.
  std::string read_stderr(std::chrono::milliseconds timeout) {
    while (read_some(err_fd_, err_buffer_, timeout)) {
    }
    err_seen_ += err_buffer_;
    err_buffer_.clear();
    return err_seen_;
  }

  // Waits for a stderr line containing `needle` and returns it; "" on timeout or end of file.
  // The lines read on the way are kept for read_stderr().
  std::string wait_for_stderr(const std::string& needle, std::chrono::milliseconds timeout) {
    const auto give_up = std::chrono::steady_clock::now() + timeout;
    std::string line;
    while (true) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(give_up - std::chrono::steady_clock::now());
      if (left.count() <= 0 || !next_line(err_fd_, err_buffer_, line, left)) return "";
      err_seen_ += line + "\n";
      if (line.find(needle) != std::string::npos) return line;
    }
  }

  // The exit status, or -1 when it was killed by a signal or did not exit in time.
  int wait_exit(std::chrono::milliseconds timeout) {
    const auto give_up = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < give_up) {
      int status = 0;
      const pid_t done = waitpid(pid_, &status, WNOHANG);
      if (done == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }

 private:
  static std::vector<std::string> environment_with(const std::vector<std::string>& changes) {
    std::vector<std::string> entries;
    for (char** entry = environ; *entry != nullptr; ++entry) entries.emplace_back(*entry);
    for (const std::string& change : changes) {
      const std::string name = change.substr(0, change.find('='));
      for (auto it = entries.begin(); it != entries.end();) {
        it = it->compare(0, name.size() + 1, name + "=") == 0 ? entries.erase(it) : it + 1;
      }
      if (change.find('=') != std::string::npos) entries.push_back(change);
    }
    return entries;
  }

  // One line from `fd` through `buffer`; false on end of file, error or timeout.
  static bool next_line(int fd, std::string& buffer, std::string& line, std::chrono::milliseconds timeout) {
    const auto give_up = std::chrono::steady_clock::now() + timeout;
    while (true) {
      const size_t newline = buffer.find('\n');
      if (newline != std::string::npos) {
        line = buffer.substr(0, newline);
        buffer.erase(0, newline + 1);
        return true;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          give_up - std::chrono::steady_clock::now());
      if (left.count() <= 0 || !read_some(fd, buffer, left)) return false;
    }
  }

  // Appends what arrives on fd within timeout; false on end of file, error or timeout.
  static bool read_some(int fd, std::string& into, std::chrono::milliseconds timeout) {
    pollfd item{fd, POLLIN, 0};
    if (poll(&item, 1, static_cast<int>(timeout.count())) <= 0) return false;
    char buffer[4096];
    const ssize_t got = read(fd, buffer, sizeof buffer);
    if (got <= 0) return false;
    into.append(buffer, static_cast<size_t>(got));
    return true;
  }

  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  std::string out_buffer_;
  std::string err_buffer_;   // stderr read, not yet split into lines
  std::string err_seen_;     // stderr lines already returned or passed by wait_for_stderr
};

}  // namespace keel::app::test_support
