// The runs kept on disk under a working directory, for the Open dialog to offer.
//
// What it is for: the probe records each run into keel-runs/ and writes each dump into
// keel-dumps/<name>/ (with the run's telemetry.msgpack) relative to the trainer's working
// directory, which is usually where the user starts keel. The Open dialog lists those files,
// newest first, so the run of last night is one click away.
// Threads: any; a plain function of the file system.
// Never: opens, reads or checks a file's contents (the main part does, when asked to open
// it); throws (an unreadable folder lists nothing); lists more than kMaxListedFiles.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace keel::app::ui {

inline constexpr size_t kMaxListedFiles = 200;

struct ListedFile {
  std::string path;            // relative to the folder listed ("keel-runs/NAME.keelrec")
  uintmax_t size_bytes = 0;
  std::filesystem::file_time_type modified;
};

// dir/keel-runs/*.keelrec and dir/keel-dumps/*/telemetry.msgpack, newest first (ties by path).
std::vector<ListedFile> find_recording_files(const std::filesystem::path& dir);

}  // namespace keel::app::ui
