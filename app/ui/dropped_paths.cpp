#include "ui/dropped_paths.hpp"

#include <utility>

namespace keel::app::ui {
namespace {

std::vector<std::string> pending;   // UI thread only

}  // namespace

void record_dropped_paths(int count, const char** paths) {
  for (int i = 0; i < count && pending.size() < kMaxDroppedPaths; ++i) {
    if (paths[i] != nullptr && paths[i][0] != '\0') pending.emplace_back(paths[i]);
  }
}

std::vector<std::string> take_dropped_paths() { return std::exchange(pending, {}); }

}  // namespace keel::app::ui
