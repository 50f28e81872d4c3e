#include "module_ranges.hpp"

#include <string_view>

namespace keel::probe {
namespace {

// The first `depth` components of a layer's module path (its name less the last component).
std::string_view module_prefix(std::string_view name, size_t depth) {
  const size_t module_end = name.rfind('.');
  if (module_end == std::string_view::npos) return {};
  const std::string_view module = name.substr(0, module_end);
  size_t end = 0;
  for (size_t d = 0; d < depth; ++d) {
    end = module.find('.', d == 0 ? 0 : end + 1);
    if (end == std::string_view::npos) return module;
  }
  return module.substr(0, end);
}

// The ranges at one depth; `deeper` says whether some layer's module path is deeper still.
std::vector<wire::ModuleRange> ranges_at(const std::vector<std::string>& names, size_t depth, bool& deeper) {
  std::vector<wire::ModuleRange> ranges;
  deeper = false;
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string_view prefix = module_prefix(names[i], depth);
    const size_t module_end = names[i].rfind('.');
    if (module_end != std::string::npos && prefix.size() < module_end) deeper = true;
    if (!ranges.empty() && ranges.back().name == prefix) {
      ++ranges.back().count;
    } else {
      ranges.push_back({std::string(prefix), static_cast<uint32_t>(i), 1});
    }
  }
  return ranges;
}

}  // namespace

std::vector<wire::ModuleRange> plan_module_ranges(const std::vector<std::string>& names, size_t target, size_t most) {
  bool deeper = false;
  std::vector<wire::ModuleRange> chosen = ranges_at(names, 1, deeper);
  if (chosen.size() > target) return chosen.size() <= most ? chosen : std::vector<wire::ModuleRange>{};
  for (size_t depth = 2; deeper; ++depth) {
    std::vector<wire::ModuleRange> next = ranges_at(names, depth, deeper);
    if (next.size() > target) break;
    chosen = std::move(next);
  }
  return chosen;
}

}  // namespace keel::probe
