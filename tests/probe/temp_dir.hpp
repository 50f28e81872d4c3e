// A fresh directory under the system temp dir, removed with everything in it at scope exit.
#pragma once

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>

#include "dump/remove_tree.hpp"

namespace keel::test {

class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("keel-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    keel::probe::remove_tree(path_.string());
    std::filesystem::create_directories(path_);
  }
  // Not std::filesystem::remove_all: it jumps to address 0 under libtorch 2.x (remove_tree.hpp).
  ~TempDir() { keel::probe::remove_tree(path_.string()); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace keel::test
