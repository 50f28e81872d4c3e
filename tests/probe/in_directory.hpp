// Runs a test in a directory and goes back to where it was at scope exit, also when an
// assertion fails: for dumps to a relative dump_dir.
#pragma once

#include <filesystem>

namespace keel::test {

class InDirectory {
 public:
  explicit InDirectory(const std::filesystem::path& dir) : before_(std::filesystem::current_path()) {
    std::filesystem::current_path(dir);
  }
  ~InDirectory() { std::filesystem::current_path(before_); }
  InDirectory(const InDirectory&) = delete;
  InDirectory& operator=(const InDirectory&) = delete;

 private:
  std::filesystem::path before_;
};

}  // namespace keel::test
