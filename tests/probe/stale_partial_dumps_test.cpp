// Partial dumps whose writer is gone are removed at attach; nothing else is (issue 30): not a
// live process's (this one's, or another's such as pid 1), not a finished dump, not a file, not
// a name of another form. A writer really killed mid-dump (a forked child) leaves debris that
// the sweep removes, counting its bytes.
#include "dump/stale_partial_dumps.hpp"

#include <gtest/gtest.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "dump/checkpoint_writer.hpp"
#include "killed_dump_writer.hpp"
#include "temp_dir.hpp"

namespace {

namespace fs = std::filesystem;
using keel::probe::partial_dump_writer;
using keel::probe::remove_stale_partial_dumps;

// A pid no process has now: a child that has exited and been reaped.
pid_t gone_pid() {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);
  return child;
}

void make_dir_with_file(const fs::path& dir, size_t bytes) {
  fs::create_directories(dir);
  std::ofstream(dir / "model.pt") << std::string(bytes, 'm');
}

TEST(StaleDumps, TheWriterIsReadFromTheNameAndOtherNamesAreNotPartialDumps) {
  EXPECT_EQ(partial_dump_writer(".step-7-command.partial-4242-0"), 4242);
  EXPECT_EQ(partial_dump_writer(".step-7.partial-x.partial-17-3"), 17);
  EXPECT_EQ(partial_dump_writer("step-7-command"), -1);
  EXPECT_EQ(partial_dump_writer(".step-7-command.partial-4242"), -1);
  EXPECT_EQ(partial_dump_writer(".step-7-command.partial--1-0"), -1);
  EXPECT_EQ(partial_dump_writer(".partial-12-0"), -1);
  EXPECT_EQ(partial_dump_writer(".step-7.partial-12-0x"), -1);
}

TEST(StaleDumps, OnlyTheDirectoriesOfWritersThatAreGoneAreRemoved) {
  keel::test::TempDir tmp("stale-dumps");
  const std::string dead = std::to_string(gone_pid());
  const std::string self = std::to_string(::getpid());
  make_dir_with_file(tmp.path() / (".step-1-nonfinite.partial-" + dead + "-0"), 1000);
  make_dir_with_file(tmp.path() / (".step-2-command.partial-" + self + "-0"), 10);   // this process's, writing
  make_dir_with_file(tmp.path() / ".step-3-command.partial-1-0", 10);                 // pid 1 is alive
  make_dir_with_file(tmp.path() / "step-4-nonfinite", 10);                            // a finished dump
  std::ofstream(tmp.path() / (".notes.partial-" + dead + "-0")) << "a file, not a dump";

  const keel::probe::StaleDumps swept = remove_stale_partial_dumps(tmp.path().string());
  ASSERT_EQ(swept.removed.size(), 1u);
  EXPECT_EQ(swept.removed[0], ".step-1-nonfinite.partial-" + dead + "-0");
  EXPECT_EQ(swept.bytes, 1000u);
  EXPECT_TRUE(swept.failed.empty());
  EXPECT_FALSE(fs::exists(tmp.path() / swept.removed[0]));
  for (const std::string& kept : {".step-2-command.partial-" + self + "-0", std::string(".step-3-command.partial-1-0"),
                                 std::string("step-4-nonfinite"), ".notes.partial-" + dead + "-0"}) {
    EXPECT_TRUE(fs::exists(tmp.path() / kept)) << kept;
  }
  EXPECT_TRUE(remove_stale_partial_dumps((tmp.path() / "no-such-dir").string()).removed.empty());
}

TEST(StaleDumps, AWriterKilledMidDumpLeavesDebrisTheSweepRemoves) {
  keel::test::TempDir tmp("stale-dumps-killed");
  keel::probe::CheckpointJob job;
  job.step = 9;
  job.dir = tmp.path().string();
  job.name = "step-9-command";
  job.files = {{"model.pt", std::string(size_t{4} << 20, 'm')}, {"manifest.json", "{}\n"}};
  int status = 0;
  const pid_t child = keel::test::write_until_killed(job, status);
  ASSERT_GE(child, 0);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the writer was not killed: the test proves nothing";
  ASSERT_EQ(std::distance(fs::directory_iterator(tmp.path()), fs::directory_iterator()), 1);

  const keel::probe::StaleDumps swept = remove_stale_partial_dumps(tmp.path().string());
  ASSERT_EQ(swept.removed.size(), 1u);
  EXPECT_EQ(swept.removed[0].rfind(".step-9-command.partial-" + std::to_string(child) + "-", 0), 0u);
  EXPECT_EQ(swept.bytes, uint64_t{1} << 20);
  EXPECT_EQ(std::distance(fs::directory_iterator(tmp.path()), fs::directory_iterator()), 0);
}

}  // namespace
