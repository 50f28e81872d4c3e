#include "backward_measuring.hpp"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "accumulation_stats.hpp"

namespace keel::probe {

bool measures_in_backward(const std::optional<bool>& option, const std::vector<torch::Tensor>& params,
                          const std::vector<bool>& swapped, int64_t cache_bytes) {
  if (option.has_value()) return *option;
  int64_t bytes = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    if (!swapped.empty() && swapped[i]) continue;
    // A weight and its gradient, float32 both.
    if (!AccumulationStats::hookable(params[i])) continue;
    bytes += params[i].numel() * 2 * static_cast<int64_t>(sizeof(float));
  }
  return bytes > cache_bytes / 2;
}

int64_t parse_cache_size(const std::string& text) {
  char* end = nullptr;
  const long long count = std::strtoll(text.c_str(), &end, 10);
  if (end == text.c_str() || count <= 0) return 0;
  if (*end == 'K') return count << 10;
  if (*end == 'M') return count << 20;
  if (*end == 'G') return count << 30;
  return count;
}

namespace {

std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// The data or unified cache of the highest level that CPU 0 reports in sysfs (0: none found).
int64_t sysfs_last_level_cache_bytes() {
  int best_level = 0;
  int64_t best_bytes = 0;
  for (int index = 0; index < 16; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    const std::string level = read_line(dir + "level");
    if (level.empty()) continue;
    if (read_line(dir + "type") == "Instruction") continue;
    const int at = std::atoi(level.c_str());
    const int64_t bytes = parse_cache_size(read_line(dir + "size"));
    if (at > best_level && bytes > 0) {
      best_level = at;
      best_bytes = bytes;
    }
  }
  return best_bytes;
}

int64_t read_last_level_cache_bytes() {
  // sysfs first: it reports the cache a core shares (an AMD EPYC's CCX, 32 MiB on the machine
  // the rule was measured on), where glibc's sysconf reported the whole socket's (320 MiB).
  if (const int64_t bytes = sysfs_last_level_cache_bytes(); bytes > 0) return bytes;
  // glibc reads these from CPUID on x86; elsewhere (or in a VM that hides them) they are 0 or -1.
  for (const int level : {_SC_LEVEL3_CACHE_SIZE, _SC_LEVEL2_CACHE_SIZE}) {
    const long bytes = sysconf(level);
    if (bytes > 0) return bytes;
  }
  return int64_t{32} << 20;
}

}  // namespace

int64_t last_level_cache_bytes() {
  // Read once: the cache does not change while the process runs, and every replan of the
  // layers (on the training thread) asks again.
  static const int64_t bytes = read_last_level_cache_bytes();
  return bytes;
}

}  // namespace keel::probe
