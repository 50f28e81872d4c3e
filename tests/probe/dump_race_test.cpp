// Processes that dump under the same name into one directory at once (ranks of a job, or two
// jobs sharing a dump directory) each get a complete directory of their own. Checking for a
// free name and then renaming let two of them pick the same name, and the later rename failed.
// Real child processes (fork), started together; built without libtorch like the crash test.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "dump/checkpoint_writer.hpp"
#include "temp_dir.hpp"

namespace {

namespace fs = std::filesystem;

TEST(DumpRace, ProcessesDumpingOneNameAtOnceEachGetADirectoryOfTheirOwn) {
  constexpr int kWriters = 8;
  constexpr int kRounds = 5;
  keel::test::TempDir tmp("dump-race");
  for (int round = 0; round < kRounds; ++round) {
    const fs::path dir = tmp.path() / ("round-" + std::to_string(round));
    fs::create_directories(dir);
    int start[2];
    ASSERT_EQ(::pipe(start), 0);
    std::vector<pid_t> children;
    for (int w = 0; w < kWriters; ++w) {
      const pid_t pid = ::fork();
      ASSERT_GE(pid, 0);
      if (pid == 0) {
        ::close(start[1]);
        char go = 0;
        if (::read(start[0], &go, 1) != 1) ::_exit(3);   // all start when the parent closes the pipe
        keel::probe::CheckpointJob job;
        job.dir = dir.string();
        job.name = "step-100-nonfinite";
        job.files = {{"model.pt", std::string(64 * 1024, 'm')}, {"manifest.json", "{}\n"}};
        const keel::probe::CheckpointResult r = keel::probe::write_checkpoint(job);
        if (!r.ok && ::write(2, r.error.data(), r.error.size()) < 0) ::_exit(2);
        ::_exit(r.ok ? 0 : 1);
      }
      children.push_back(pid);
    }
    ::close(start[0]);
    const std::vector<char> go(kWriters, 'g');
    ASSERT_EQ(::write(start[1], go.data(), go.size()), kWriters);
    ::close(start[1]);
    int failed = 0;
    for (pid_t pid : children) {
      int status = 0;
      ::waitpid(pid, &status, 0);
      failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    EXPECT_EQ(failed, 0) << "round " << round;
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) {
      names.push_back(e.path().filename().string());
      EXPECT_EQ(fs::file_size(e.path() / "model.pt"), 64u * 1024) << e.path();
    }
    EXPECT_EQ(names.size(), size_t(kWriters)) << "round " << round;
  }
}

}  // namespace
