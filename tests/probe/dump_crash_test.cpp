// A process killed in the middle of writing a dump leaves nothing that looks complete: the
// half-written files sit in a hidden `.<name>.partial-<pid>` directory, and no directory has
// the dump's final name. A real child process (fork) runs the writer and is SIGKILLed once its
// partial model.pt has data on disk. Built without libtorch: the writer does not need it, and
// fork() in a process without libtorch's thread pools is safe.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint_writer.hpp"
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
  // 512 MiB in two files: a second or more of writing and fsync; the kill comes after 1 MiB.
  job.files = {{"model.pt", std::string(size_t{256} << 20, 'm')}, {"optimizer.pt", std::string(size_t{256} << 20, 'o')},
               {"manifest.json", "{}\n"}};

  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    keel::probe::write_checkpoint(job);
    _exit(0);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (partial_model_bytes(tmp.path()) < (size_t{1} << 20) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the writer finished before it could be killed; the test proves nothing";

  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(tmp.path())) names.push_back(e.path().filename().string());
  ASSERT_EQ(names.size(), 1u);
  EXPECT_EQ(names[0], ".step-7-command.partial-" + std::to_string(child)) << "a dump under a final name after a crash";

  // The next dump (another process: another pid) is written beside the debris, complete.
  job.files = {{"model.pt", "m"}, {"manifest.json", "{}\n"}};
  const auto result = keel::probe::write_checkpoint(job);
  ASSERT_TRUE(result.ok) << result.error;
  EXPECT_EQ(result.path, (tmp.path() / "step-7-command").string());
}

}  // namespace
