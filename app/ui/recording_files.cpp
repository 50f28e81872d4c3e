#include "ui/recording_files.hpp"

#include <algorithm>
#include <system_error>

namespace keel::app::ui {
namespace {

namespace fs = std::filesystem;

void add_if_file(const fs::path& dir, const fs::path& relative, std::vector<ListedFile>& out) {
  std::error_code error;
  const fs::path full = dir / relative;
  if (!fs::is_regular_file(full, error)) return;
  ListedFile file;
  file.path = relative.generic_string();
  file.size_bytes = fs::file_size(full, error);
  if (error) file.size_bytes = 0;
  file.modified = fs::last_write_time(full, error);
  if (error) file.modified = fs::file_time_type::min();
  out.push_back(std::move(file));
}

// The entries of `dir` (none when it cannot be read), without following the iterator's
// exceptions.
std::vector<fs::directory_entry> entries_of(const fs::path& dir) {
  std::vector<fs::directory_entry> entries;
  std::error_code error;
  fs::directory_iterator it(dir, error);
  for (; !error && it != fs::directory_iterator(); it.increment(error)) entries.push_back(*it);
  return entries;
}

}  // namespace

std::vector<ListedFile> find_recording_files(const fs::path& dir) {
  std::vector<ListedFile> files;
  for (const fs::directory_entry& entry : entries_of(dir / "keel-runs")) {
    if (entry.path().extension() == ".keelrec") {
      add_if_file(dir, fs::path("keel-runs") / entry.path().filename(), files);
    }
  }
  for (const fs::directory_entry& entry : entries_of(dir / "keel-dumps")) {
    add_if_file(dir, fs::path("keel-dumps") / entry.path().filename() / "telemetry.msgpack", files);
  }
  std::sort(files.begin(), files.end(), [](const ListedFile& a, const ListedFile& b) {
    return a.modified != b.modified ? a.modified > b.modified : a.path < b.path;
  });
  if (files.size() > kMaxListedFiles) files.resize(kMaxListedFiles);
  return files;
}

}  // namespace keel::app::ui
