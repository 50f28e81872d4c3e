#include "dump/stale_partial_dumps.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dump/remove_tree.hpp"

namespace keel::probe {
namespace {

bool all_digits(const std::string& text) {
  if (text.empty() || text.size() > 18) return false;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// kill(pid, 0) succeeds for a process we may signal and fails with EPERM for one of another
// user: both are alive. Only ESRCH says the pid is free.
bool process_alive(int64_t pid) { return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH; }

// Bytes of the regular files under `path` (a dump is one level deep; deeper is counted too).
uint64_t tree_bytes(const std::string& path) {
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) return 0;
  uint64_t bytes = 0;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    struct stat st {};
    const std::string child = path + "/" + name;
    if (::lstat(child.c_str(), &st) != 0) continue;
    if (S_ISREG(st.st_mode)) bytes += static_cast<uint64_t>(st.st_size);
    if (S_ISDIR(st.st_mode)) bytes += tree_bytes(child);
  }
  ::closedir(dir);
  return bytes;
}

}  // namespace

int64_t partial_dump_writer(const std::string& name) {
  // ".<name>.partial-<pid>-<n>"
  if (name.size() < 2 || name[0] != '.') return -1;
  const size_t marker = name.rfind(".partial-");
  if (marker == std::string::npos || marker == 0) return -1;
  const std::string rest = name.substr(marker + 9);
  const size_t dash = rest.find('-');
  if (dash == std::string::npos) return -1;
  const std::string pid = rest.substr(0, dash);
  if (!all_digits(pid) || !all_digits(rest.substr(dash + 1))) return -1;
  const int64_t value = std::strtoll(pid.c_str(), nullptr, 10);
  return value > 0 ? value : -1;
}

StaleDumps remove_stale_partial_dumps(const std::string& dir) {
  StaleDumps out;
  DIR* listing = ::opendir(dir.c_str());
  if (listing == nullptr) return out;
  std::vector<std::string> stale;
  while (const dirent* entry = ::readdir(listing)) {
    const std::string name = entry->d_name;
    const int64_t writer = partial_dump_writer(name);
    if (writer < 0 || writer == static_cast<int64_t>(::getpid()) || process_alive(writer)) continue;
    struct stat st {};
    if (::lstat((dir + "/" + name).c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    stale.push_back(name);
  }
  ::closedir(listing);
  for (const std::string& name : stale) {
    const std::string path = dir + "/" + name;
    const uint64_t bytes = tree_bytes(path);
    if (remove_tree(path)) {
      out.removed.push_back(name);
      out.bytes += bytes;
    } else {
      out.failed.push_back(name + ": " + std::strerror(errno));
    }
  }
  return out;
}

}  // namespace keel::probe
