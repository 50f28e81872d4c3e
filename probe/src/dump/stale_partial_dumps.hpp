// stale_partial_dumps: the hidden `.partial` directories a killed dump writer left behind.
//
// What it is for: a dump is written as `<dump dir>/.<name>.partial-<pid>-<n>/` and renamed
// when whole (checkpoint_writer.hpp), so a trainer killed mid-dump leaves one behind; nothing
// else ever removes it, and a job killed often fills the disk with them (issue 30: 15 of them,
// 33.6 MB). At attach the probe removes those whose writer is gone: the pid in the name is no
// living process. One of a live process (another trainer sharing the directory, or this one)
// is never touched; a dead writer's pid taken by a new process keeps its directory until that
// process ends too, which errs on the safe side.
// Threads: any. Never: throws, follows a symbolic link, or removes anything but a directory
// whose name has the `.partial-<pid>-<n>` form directly under `dir`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace keel::probe {

struct StaleDumps {
  std::vector<std::string> removed;   // names under the directory
  uint64_t bytes = 0;                 // what they held
  std::vector<std::string> failed;    // "name: why" for those that could not be removed
};

// The pid a `.partial` dump directory's name gives, or -1 when `name` is not one.
int64_t partial_dump_writer(const std::string& name);

// Removes the partial dumps in `dir` whose writer is no living process. A missing directory
// has none.
StaleDumps remove_stale_partial_dumps(const std::string& dir);

}  // namespace keel::probe
