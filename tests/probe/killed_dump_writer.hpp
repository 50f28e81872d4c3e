// A dump writer killed mid-write, for real: a forked child runs write_checkpoint() and the
// kernel kills it (SIGXFSZ) once a file it writes reaches 1 MiB (RLIMIT_FSIZE), a point that
// does not depend on the disk's speed or the scheduler. For the tests of what such a writer
// leaves behind. Call it only from a process without libtorch's thread pools.
#pragma once

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dump/checkpoint_writer.hpp"

namespace keel::test {

// The child's pid; `status` is what waitpid() said of it.
inline pid_t write_until_killed(const keel::probe::CheckpointJob& job, int& status) {
  const pid_t child = fork();
  if (child == 0) {
    const rlimit file_limit{rlim_t{1} << 20, rlim_t{1} << 20}, no_core{0, 0};
    setrlimit(RLIMIT_FSIZE, &file_limit);
    setrlimit(RLIMIT_CORE, &no_core);
    keel::probe::write_checkpoint(job);
    _exit(0);
  }
  status = 0;
  if (child > 0) waitpid(child, &status, 0);
  return child;
}

}  // namespace keel::test
