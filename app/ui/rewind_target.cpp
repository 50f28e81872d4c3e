#include "ui/rewind_target.hpp"

#include <cerrno>
#include <cstdlib>
#include <string>

namespace keel::app::ui {

std::optional<int64_t> rewind_target(const char* typed) {
  std::string text(typed);
  while (!text.empty() && text.back() == ' ') text.pop_back();
  while (!text.empty() && text.front() == ' ') text.erase(text.begin());
  if (text.empty()) return -1;
  // strtoll would read "-5" and "+5"; a step is digits only.
  if (text.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long long step = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return std::nullopt;
  return static_cast<int64_t>(step);
}

}  // namespace keel::app::ui
