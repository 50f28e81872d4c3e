// The dump writer on its own: a complete directory appears only under its final name, a write
// that fails half-way (file size limit standing in for a full disk) leaves nothing behind,
// names never collide, labels cannot escape the dump directory, a dump that would leave the
// disk too full is not started.
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <atomic>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>
#include <vector>

#include "dump/checkpoint_writer.hpp"
#include "directory_entries.hpp"
#include "in_directory.hpp"
#include "temp_dir.hpp"

namespace {

namespace fs = std::filesystem;
using keel::test::directory_entries;
using keel::test::InDirectory;
using keel::probe::CheckpointJob;
using keel::probe::CheckpointResult;
using keel::probe::sanitize_label;
using keel::probe::write_checkpoint;

CheckpointJob job_in(const fs::path& dir, const std::string& name, size_t big_bytes = 1000) {
  CheckpointJob job;
  job.token = 7;
  job.step = 12;
  job.dir = dir.string();
  job.name = name;
  job.files = {{"model.pt", std::string(big_bytes, 'm')}, {"manifest.json", "{}\n"}};
  return job;
}

TEST(CheckpointWriter, WritesEveryFileUnderTheFinalNameAndCountsTheBytes) {
  keel::test::TempDir tmp("dump-write");
  const fs::path dir = tmp.path() / "nested" / "dumps";   // created on demand
  const CheckpointResult r = write_checkpoint(job_in(dir, "step-12-command"));
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.token, 7u);
  EXPECT_EQ(r.step, 12);
  EXPECT_EQ(r.path, (dir / "step-12-command").string());
  EXPECT_EQ(r.bytes, 1003);
  EXPECT_EQ(directory_entries(dir), std::vector<std::string>{"step-12-command"});
  EXPECT_EQ(fs::file_size(dir / "step-12-command" / "model.pt"), 1000u);
  std::ifstream manifest(dir / "step-12-command" / "manifest.json");
  std::string text((std::istreambuf_iterator<char>(manifest)), {});
  EXPECT_EQ(text, "{}\n");

  // The same name again gets a suffix instead of mixing two dumps in one directory.
  const CheckpointResult again = write_checkpoint(job_in(dir, "step-12-command"));
  ASSERT_TRUE(again.ok) << again.error;
  EXPECT_EQ(again.path, (dir / "step-12-command-2").string());
}

// keel-demo's default dump directory is "keel-dumps", relative to the trainer's working
// directory: the result names the absolute directory written, the one a user can copy from a
// client anywhere, whether the dump was written or not.
TEST(CheckpointWriter, ARelativeDirectoryIsReportedAsTheAbsolutePathWritten) {
  keel::test::TempDir tmp("dump-relative");
  const fs::path root = fs::canonical(tmp.path());
  InDirectory in_tmp(tmp.path());
  fs::create_directories("runs/a");
  const CheckpointResult r = write_checkpoint(job_in("./runs/a/../dumps", "step-12-command"));
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.path, (root / "runs" / "dumps" / "step-12-command").string());
  EXPECT_TRUE(fs::exists(fs::path(r.path) / "model.pt"));

  std::ofstream("in-the-way") << "a file where the dump directory should be";
  const CheckpointResult failed = write_checkpoint(job_in("in-the-way/dumps", "step-13-command"));
  EXPECT_FALSE(failed.ok);
  EXPECT_EQ(failed.path, (root / "in-the-way" / "dumps" / "step-13-command").string());
  EXPECT_NE(failed.error.find("cannot create dump directory " + (root / "in-the-way" / "dumps").string()),
            std::string::npos)
      << failed.error;
}

// Two writers in one process (two probes, a GAN's generator and discriminator, both dumping
// step N's first non-finite step) built in one temporary directory named after the pid, and
// tore each other's dumps. Each write builds in its own.
TEST(CheckpointWriter, WritersInOneProcessDumpingOneNameAtOnceEachGetACompleteDirectory) {
  constexpr int kWriters = 8;
  keel::test::TempDir tmp("dump-threads");
  for (int round = 0; round < 5; ++round) {
    const fs::path dir = tmp.path() / ("round-" + std::to_string(round));
    std::atomic<bool> go{false};
    std::vector<CheckpointResult> results(kWriters);
    std::vector<std::thread> writers;
    for (int w = 0; w < kWriters; ++w) {
      writers.emplace_back([&, w] {
        while (!go.load()) std::this_thread::yield();
        results[w] = write_checkpoint(job_in(dir, "step-12-nonfinite", 1 << 16));
      });
    }
    go.store(true);
    for (auto& t : writers) t.join();
    std::set<std::string> paths;
    for (const auto& r : results) {
      ASSERT_TRUE(r.ok) << "round " << round << ": " << r.error;
      paths.insert(r.path);
      EXPECT_EQ(fs::file_size(fs::path(r.path) / "model.pt"), 1u << 16);
      EXPECT_TRUE(fs::exists(fs::path(r.path) / "manifest.json"));
    }
    EXPECT_EQ(paths.size(), static_cast<size_t>(kWriters));
    EXPECT_EQ(directory_entries(dir).size(), static_cast<size_t>(kWriters)) << "no temporary directory left";
  }
}

TEST(CheckpointWriter, AWriteFailingHalfWayLeavesNoFileAndSaysWhy) {
  keel::test::TempDir tmp("dump-full");
  // A file size limit makes write() fail with EFBIG part-way through model.pt, like a disk
  // that fills up during the dump. SIGXFSZ would kill the test instead.
  struct rlimit old_limit {};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old_limit;
  small.rlim_cur = 4096;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  const CheckpointResult r = write_checkpoint(job_in(tmp.path(), "step-12-nonfinite", 1 << 20));
  setrlimit(RLIMIT_FSIZE, &old_limit);
  std::signal(SIGXFSZ, old_handler);

  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("cannot write"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("model.pt"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("too large"), std::string::npos) << r.error;
  EXPECT_EQ(r.bytes, 0);
  EXPECT_TRUE(directory_entries(tmp.path()).empty()) << "a partial dump was left behind";
}

// The free space a job must leave is checked against the filesystem as it is: a job that
// would leave less is not started, and one that leaves enough is written.
TEST(CheckpointWriter, AJobThatWouldLeaveTooLittleFreeIsNotStarted) {
  keel::test::TempDir tmp("dump-reserve");
  const auto available = static_cast<int64_t>(fs::space(tmp.path()).available);
  CheckpointJob job = job_in(tmp.path(), "step-12-command", 1 << 20);
  job.min_free_bytes = available;   // the job's own megabyte takes it below
  const CheckpointResult refused = write_checkpoint(job);
  EXPECT_FALSE(refused.ok);
  EXPECT_NE(refused.error.find("dump_min_free_bytes"), std::string::npos) << refused.error;
  EXPECT_EQ(refused.bytes, 0);
  EXPECT_TRUE(directory_entries(tmp.path()).empty()) << "nothing may be written for a refused dump";

  job.min_free_bytes = available / 2;
  const CheckpointResult written = write_checkpoint(job);
  EXPECT_TRUE(written.ok) << written.error;
  EXPECT_EQ(directory_entries(tmp.path()), std::vector<std::string>{"step-12-command"});
}

TEST(CheckpointWriter, ADumpDirectoryThatCannotBeCreatedIsAnError) {
  keel::test::TempDir tmp("dump-blocked");
  std::ofstream(tmp.path() / "file") << "not a directory";
  const CheckpointResult r = write_checkpoint(job_in(tmp.path() / "file" / "dumps", "step-1-command"));
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("cannot create dump directory"), std::string::npos) << r.error;
}

// Polls until `count` results are in (or 5 s pass).
std::vector<CheckpointResult> results(keel::probe::CheckpointWriter& writer, size_t count) {
  std::vector<CheckpointResult> all, some;
  for (int i = 0; i < 500 && all.size() < count; ++i) {
    if (writer.poll(some)) all.insert(all.end(), some.begin(), some.end());
    else std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return all;
}

TEST(CheckpointWriter, TheThreadWritesOneJobAtATimeAndReportsIt) {
  using Admission = keel::probe::CheckpointWriter::Admission;
  keel::test::TempDir tmp("dump-thread");
  keel::probe::CheckpointWriter writer;
  std::atomic<int> callbacks{0};
  CheckpointJob job = job_in(tmp.path(), "step-12-command", 8 << 20);
  job.on_written = [&](const CheckpointResult& r) {
    EXPECT_TRUE(r.ok) << r.error;
    ++callbacks;
  };
  ASSERT_TRUE(writer.accepts(Admission::kWhenIdle));
  ASSERT_TRUE(writer.submit(job));
  EXPECT_FALSE(writer.accepts(Admission::kWhenIdle));
  EXPECT_FALSE(writer.submit(job_in(tmp.path(), "step-13-command"))) << "a second job while one is in flight";
  const std::vector<CheckpointResult> done = results(writer, 1);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_TRUE(done[0].ok) << done[0].error;
  EXPECT_EQ(callbacks.load(), 1);
  EXPECT_TRUE(writer.accepts(Admission::kWhenIdle));
  EXPECT_TRUE(writer.submit(job_in(tmp.path(), "step-13-command")));
}

// The automatic dump at a blow-up's first step waits behind a dump in flight instead of being
// lost; a third job is refused, so the writer never holds more than two captures.
TEST(CheckpointWriter, AJobAdmittedBehindOneWaitsForItAndBothAreWritten) {
  using Admission = keel::probe::CheckpointWriter::Admission;
  keel::test::TempDir tmp("dump-behind");
  keel::probe::CheckpointWriter writer;
  ASSERT_TRUE(writer.submit(job_in(tmp.path(), "step-12-command", 32 << 20)));
  EXPECT_TRUE(writer.accepts(Admission::kBehindOne));
  ASSERT_TRUE(writer.submit(job_in(tmp.path(), "step-13-nonfinite"), Admission::kBehindOne));
  EXPECT_FALSE(writer.accepts(Admission::kBehindOne));
  EXPECT_FALSE(writer.submit(job_in(tmp.path(), "step-14-nonfinite"), Admission::kBehindOne)) << "a third job";
  EXPECT_FALSE(writer.submit(job_in(tmp.path(), "step-14-command"))) << "a command dump waits for none";
  const std::vector<CheckpointResult> done = results(writer, 2);
  ASSERT_EQ(done.size(), 2u);
  EXPECT_TRUE(done[0].ok && done[1].ok) << done[0].error << done[1].error;
  EXPECT_NE(done[0].path.find("step-12-command"), std::string::npos) << "written in the order given";
  EXPECT_EQ(directory_entries(tmp.path()), (std::vector<std::string>{"step-12-command", "step-13-nonfinite"}));
}

// Both jobs a writer holds when it is finished are written: the user asked for them.
TEST(CheckpointWriter, FinishWritesEveryJobItHolds) {
  keel::test::TempDir tmp("dump-finish");
  keel::probe::CheckpointWriter writer;
  ASSERT_TRUE(writer.submit(job_in(tmp.path(), "step-12-command", 32 << 20)));
  ASSERT_TRUE(writer.submit(job_in(tmp.path(), "step-13-nonfinite"), keel::probe::CheckpointWriter::Admission::kBehindOne));
  writer.finish();
  EXPECT_FALSE(writer.submit(job_in(tmp.path(), "step-14-command"))) << "refused after finish";
  EXPECT_EQ(results(writer, 2).size(), 2u);
  EXPECT_EQ(directory_entries(tmp.path()), (std::vector<std::string>{"step-12-command", "step-13-nonfinite"}));
}

TEST(CheckpointWriter, LabelsAreSanitisedIntoOneHarmlessNameComponent) {
  EXPECT_EQ(sanitize_label("before-lr-bump_2"), "before-lr-bump_2");
  EXPECT_EQ(sanitize_label("../../etc/passwd"), "_.._etc_passwd");
  EXPECT_EQ(sanitize_label("..hidden"), "hidden");
  EXPECT_EQ(sanitize_label("a b/c\\d\n"), "a_b_c_d_");
  EXPECT_EQ(sanitize_label("ünï"), "__n__");
  EXPECT_EQ(sanitize_label(std::string(300, 'x')).size(), 64u);
  EXPECT_EQ(sanitize_label(""), "");
}

}  // namespace
