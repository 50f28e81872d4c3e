// find_recording_files: the Open dialog offers the working directory's recordings and dumps'
// telemetry, newest first, and nothing else.
#include "ui/recording_files.hpp"

#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace keel::app::ui {
namespace {

namespace fs = std::filesystem;

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::path(testing::TempDir()) / ("keel-recording-files-" + std::to_string(::getpid())) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// Writes `path` (under `dir`), last written `age` ago.
void write(const fs::path& dir, const std::string& path, std::chrono::seconds age) {
  fs::create_directories((dir / path).parent_path());
  std::ofstream(dir / path) << "bytes";
  fs::last_write_time(dir / path, fs::file_time_type::clock::now() - age);
}

std::vector<std::string> paths_of(const std::vector<ListedFile>& files) {
  std::vector<std::string> paths;
  for (const ListedFile& file : files) paths.push_back(file.path);
  return paths;
}

TEST(RecordingFiles, ListsRecordingsAndDumpsTelemetryNewestFirst) {
  using std::chrono::hours;
  const fs::path dir = scratch("both");
  write(dir, "keel-runs/last-night.keelrec", hours(10));
  write(dir, "keel-runs/this-morning.keelrec", hours(1));
  write(dir, "keel-dumps/step-2000-nonfinite/telemetry.msgpack", hours(9));
  // Not runs: other files beside them, a dump without its telemetry, a folder named like one.
  write(dir, "keel-runs/notes.txt", hours(0));
  write(dir, "keel-dumps/step-10-manual/model.pt", hours(0));
  fs::create_directories(dir / "keel-runs/folder.keelrec");
  write(dir, "elsewhere.keelrec", hours(0));

  const std::vector<ListedFile> files = find_recording_files(dir);
  EXPECT_EQ(paths_of(files), (std::vector<std::string>{"keel-runs/this-morning.keelrec",
                                                       "keel-dumps/step-2000-nonfinite/telemetry.msgpack",
                                                       "keel-runs/last-night.keelrec"}));
  ASSERT_FALSE(files.empty());
  EXPECT_EQ(files[0].size_bytes, 5u);
}

TEST(RecordingFiles, AFolderWithoutRunsListsNothing) {
  EXPECT_TRUE(find_recording_files(scratch("empty")).empty());
  EXPECT_TRUE(find_recording_files(scratch("empty") / "no-such-folder").empty());
}

}  // namespace
}  // namespace keel::app::ui
