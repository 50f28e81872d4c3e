#include "ui/distinct_labels.hpp"

#include <algorithm>
#include <cstring>

namespace keel::app::ui {
namespace {

bool is_separator(char c) { return c != '\0' && std::strchr("-_./: ", c) != nullptr; }

// How many leading characters every name shares, ending just after a separator (0: none).
size_t shared_head(const std::vector<std::string>& names) {
  size_t common = names.front().size();
  for (const std::string& name : names) {
    const auto [a, b] = std::mismatch(names.front().begin(), names.front().begin() + long(std::min(common, name.size())),
                                      name.begin());
    common = size_t(a - names.front().begin());
  }
  while (common > 0 && !is_separator(names.front()[common - 1])) --common;
  return common;
}

// How many trailing characters every name shares, starting at a separator (0: none).
size_t shared_tail(const std::vector<std::string>& names) {
  size_t common = names.front().size();
  for (const std::string& name : names) {
    const auto [a, b] = std::mismatch(names.front().rbegin(), names.front().rbegin() + long(std::min(common, name.size())),
                                      name.rbegin());
    common = size_t(a - names.front().rbegin());
  }
  const std::string& first = names.front();
  while (common > 0 && !is_separator(first[first.size() - common])) --common;
  return common;
}

}  // namespace

std::vector<std::string> distinct_parts(const std::vector<std::string>& names) {
  if (names.size() < 2 || std::all_of(names.begin(), names.end(), [&](const std::string& n) { return n == names.front(); })) {
    return names;
  }
  const size_t head = shared_head(names);
  std::vector<std::string> parts;
  for (const std::string& name : names) parts.push_back(name.substr(head));
  const size_t tail = shared_tail(parts);
  for (std::string& part : parts) part.resize(part.size() - tail);
  const bool any_empty = std::any_of(parts.begin(), parts.end(), [](const std::string& p) { return p.empty(); });
  return any_empty ? names : parts;
}

std::vector<std::string> short_distinct_labels(const std::vector<std::string>& names, float max_width,
                                               const TextWidth& width, const std::string& ellipsis) {
  std::vector<std::string> labels = distinct_parts(names);
  for (std::string& label : labels) label = elide_middle(label, max_width, width, ellipsis);
  return labels;
}

}  // namespace keel::app::ui
