// A process killed in the middle of writing a dump leaves nothing that looks complete: the
// half-written files sit in a hidden `.<name>.partial-<pid>-<n>` directory, and no directory has
// the dump's final name. A real child process (fork) runs the writer and is killed by the
// kernel once its partial model.pt reaches 1 MiB (RLIMIT_FSIZE: SIGXFSZ), a point that does
// not depend on how fast the disk is or when the test thread gets the CPU (a SIGKILL sent
// after polling the file's size came too late on a tmpfs that wrote 512 MiB in 0.2 s). Built
// without libtorch: the writer does not need it, and fork() in a process without libtorch's
// thread pools is safe.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "dump/checkpoint_writer.hpp"
#include "killed_dump_writer.hpp"
#include "temp_dir.hpp"

namespace {

namespace fs = std::filesystem;

// The largest model.pt inside a hidden partial directory of `dir`, 0 when there is none.
uintmax_t partial_model_bytes(const fs::path& dir) {
  std::error_code ec;
  uintmax_t most = 0;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(".step-", 0) != 0 || name.find(".partial-") == std::string::npos) continue;
    const uintmax_t size = fs::file_size(e.path() / "model.pt", ec);
    if (!ec) most = std::max(most, size);
  }
  return most;
}

TEST(DumpCrash, AWriterKilledMidDumpLeavesNoCompleteLookingDirectory) {
  keel::test::TempDir tmp("dump-crash");
  keel::probe::CheckpointJob job;
  job.step = 7;
  job.dir = tmp.path().string();
  job.name = "step-7-command";
  // 512 MiB in two files; the writer dies at 1 MiB.
  job.files = {{"model.pt", std::string(size_t{256} << 20, 'm')}, {"optimizer.pt", std::string(size_t{256} << 20, 'o')},
               {"manifest.json", "{}\n"}};

  int status = 0;
  const pid_t child = keel::test::write_until_killed(job, status);
  ASSERT_GE(child, 0);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the writer was not killed: the test proves nothing";
  EXPECT_EQ(WTERMSIG(status), SIGXFSZ);
  EXPECT_EQ(partial_model_bytes(tmp.path()), uintmax_t{1} << 20) << "killed before it wrote anything";

  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(tmp.path())) names.push_back(e.path().filename().string());
  ASSERT_EQ(names.size(), 1u);
  EXPECT_EQ(names[0].rfind(".step-7-command.partial-" + std::to_string(child) + "-", 0), 0u)
      << names[0] << ": a dump under a final name after a crash";

  // The next dump (another process: another pid) is written beside the debris, complete.
  job.files = {{"model.pt", "m"}, {"manifest.json", "{}\n"}};
  const auto result = keel::probe::write_checkpoint(job);
  ASSERT_TRUE(result.ok) << result.error;
  EXPECT_EQ(result.path, (tmp.path() / "step-7-command").string());
}

}  // namespace
