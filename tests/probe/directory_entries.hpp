// The names in a directory, sorted; none when it does not exist. What the dump tests compare
// a dump directory with.
#pragma once

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

namespace keel::test {

inline std::vector<std::string> directory_entries(const std::filesystem::path& dir) {
  std::vector<std::string> out;
  if (!std::filesystem::exists(dir)) return out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace keel::test
