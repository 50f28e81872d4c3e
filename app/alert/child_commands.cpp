#include "alert/child_commands.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <thread>

extern char** environ;

namespace keel::app {
namespace {

std::string seconds_text(double seconds) {
  const double rounded = std::round(seconds * 10) / 10;
  std::string text = std::to_string(rounded);
  text.erase(text.find_last_not_of('0') + 1);
  if (!text.empty() && text.back() == '.') text.pop_back();
  return text;
}

// A file holding `input` from its start, for the child's standard input: a memory file, so the
// whole input is there before the child runs and nobody waits on a pipe. -1 with `error` set.
int input_file(const std::string& input, std::string& error) {
  if (input.empty()) {
    const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0) error = std::string("cannot open /dev/null: ") + std::strerror(errno);
    return fd;
  }
  const int fd = ::memfd_create("keel-alert", MFD_CLOEXEC);
  if (fd < 0) {
    error = std::string("cannot make its input file: ") + std::strerror(errno);
    return -1;
  }
  for (size_t written = 0; written < input.size();) {
    const ssize_t n = ::write(fd, input.data() + written, input.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      error = std::string("cannot write its input: ") + std::strerror(errno);
      ::close(fd);
      return -1;
    }
    written += size_t(n);
  }
  ::lseek(fd, 0, SEEK_SET);
  return fd;
}

// posix_spawn's setup: `input` on stdin, stdout on our stderr, no other file of ours; a
// process group of its own; the default SIGPIPE and no blocked signal, whatever this process set.
int spawn(const std::vector<std::string>& argv, int input, pid_t& pid) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, input, STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, STDERR_FILENO, STDOUT_FILENO);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
  // The dashboard's X connection and sockets are not the command's to hold open.
  posix_spawn_file_actions_addclosefrom_np(&actions, STDERR_FILENO + 1);
#endif
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setsigdefault(&attributes, &defaults);
  posix_spawnattr_setpgroup(&attributes, 0);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  const int error = ::posix_spawn(&pid, args[0], &actions, &attributes, args.data(), environ);
  posix_spawnattr_destroy(&attributes);
  posix_spawn_file_actions_destroy(&actions);
  return error;
}

// How a child that ended failed, as a sentence's end; "" when it succeeded.
std::string failure(int status) {
  if (WIFEXITED(status)) {
    const int code = WEXITSTATUS(status);
    if (code == 0) return "";
    std::string text = "exited with status " + std::to_string(code);
    if (code == 127) text += " (the shell found no such command)";
    if (code == 126) text += " (the command could not be run)";
    return text;
  }
  if (WIFSIGNALED(status)) {
    return "was killed by signal " + std::to_string(WTERMSIG(status)) + " (" + ::strsignal(WTERMSIG(status)) + ")";
  }
  return "ended with wait status " + std::to_string(status);
}

}  // namespace

ChildCommands::ChildCommands(double timeout_secs, Report report)
    : timeout_(std::chrono::duration<double>(timeout_secs)), report_(std::move(report)) {}

ChildCommands::~ChildCommands() { finish(std::chrono::milliseconds(0)); }

bool ChildCommands::start(const std::string& what, const std::vector<std::string>& argv, const std::string& input,
                          Clock::time_point now) {
  if (children_.size() >= kMaxRunning) {
    report_(what + " was not run: " + std::to_string(children_.size()) + " alert commands are still running");
    return false;
  }
  std::string error;
  const int fd = input_file(input, error);
  if (fd < 0) {
    report_(what + " was not run: " + error);
    return false;
  }
  pid_t pid = -1;
  const int spawned = spawn(argv, fd, pid);
  ::close(fd);
  if (spawned != 0) {
    report_(what + " was not run: cannot start " + argv[0] + ": " + std::strerror(spawned));
    return false;
  }
  children_.push_back(Child{pid, what, now, false});
  return true;
}

bool ChildCommands::reap(Child& child, bool block) {
  int status = 0;
  pid_t done;
  do {
    done = ::waitpid(child.pid, &status, block ? 0 : WNOHANG);
  } while (done < 0 && errno == EINTR);
  if (done == 0) return false;
  // -1 (ECHILD): reaped elsewhere (SIGCHLD ignored); nothing is left to wait for.
  if (done < 0) return true;
  if (child.killed_for_time) {
    report_(child.what + " ran longer than " + seconds_text(timeout_.count()) + " s and was killed");
  } else if (const std::string failed = failure(status); !failed.empty()) {
    report_(child.what + " " + failed);
  }
  return true;
}

void ChildCommands::poll(Clock::time_point now) {
  for (auto it = children_.begin(); it != children_.end();) {
    if (reap(*it, false)) {
      it = children_.erase(it);
      continue;
    }
    if (!it->killed_for_time && now - it->started >= timeout_) {
      // The whole group: the shell and what it started.
      ::kill(-it->pid, SIGKILL);
      it->killed_for_time = true;
    }
    ++it;
  }
}

void ChildCommands::finish(std::chrono::milliseconds grace) {
  const Clock::time_point until = Clock::now() + grace;
  while (!children_.empty() && Clock::now() < until) {
    poll(Clock::now());
    if (!children_.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (Child& child : children_) {
    if (child.killed_for_time) {
      reap(child, true);   // says it ran too long
      continue;
    }
    ::kill(-child.pid, SIGKILL);
    report_(child.what + " was still running at exit and was killed");
    int status = 0;
    while (::waitpid(child.pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  children_.clear();
}

}  // namespace keel::app
