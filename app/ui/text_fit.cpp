#include "ui/text_fit.hpp"

#include <cstdint>

namespace keel::app::ui {
namespace {

// The offset in `name` just after its first `count` dotted components and their dots.
size_t after_parts(const std::string& name, size_t count) {
  size_t at = 0;
  for (size_t i = 0; i < count; ++i) {
    const size_t dot = name.find('.', at);
    if (dot == std::string::npos) return at;
    at = dot + 1;
  }
  return at;
}

}  // namespace

std::vector<std::string> dotted_parts(const std::string& name) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t dot = name.find('.', start);
    parts.push_back(name.substr(start, dot - start));
    if (dot == std::string::npos) return parts;
    start = dot + 1;
  }
}

std::string elide_middle(const std::string& text, float max_width, const TextWidth& width,
                         const std::string& ellipsis) {
  if (width(text) <= max_width) return text;
  // Longest first: a third of the characters kept from the start, the rest from the end.
  const auto continuation = [&](size_t at) { return at < text.size() && (uint8_t(text[at]) & 0xC0) == 0x80; };
  for (size_t kept = text.size(); kept-- > 1;) {
    // Whole UTF-8 characters only (a path may hold others than ASCII).
    size_t head = kept / 3, tail_at = text.size() - (kept - kept / 3);
    while (head > 0 && continuation(head)) --head;
    while (continuation(tail_at)) ++tail_at;
    std::string candidate = text.substr(0, head) + ellipsis + text.substr(tail_at);
    if (width(candidate) <= max_width) return candidate;
  }
  return ellipsis;
}

size_t shared_leading_parts(const std::vector<std::string>& names) {
  if (names.empty()) return 0;
  const std::vector<std::string> first = dotted_parts(names.front());
  size_t shared = first.size() - 1;
  for (size_t i = 1; i < names.size() && shared > 0; ++i) {
    const std::vector<std::string> parts = dotted_parts(names[i]);
    size_t same = 0;
    while (same < shared && same + 1 < parts.size() && parts[same] == first[same]) ++same;
    shared = same;
  }
  return shared;
}

std::string fit_layer_name(const std::string& name, size_t shared_parts, float max_width, const TextWidth& width,
                           const std::string& ellipsis) {
  if (width(name) <= max_width) return name;
  const size_t cut = after_parts(name, shared_parts);
  const std::string prefix = cut > 0 ? ellipsis : std::string();
  const std::string rest = name.substr(cut);
  if (width(prefix + rest) <= max_width) return prefix + rest;
  const TextWidth with_prefix = [&](const std::string& text) { return width(prefix + text); };
  return prefix + elide_middle(rest, max_width, with_prefix, ellipsis);
}

}  // namespace keel::app::ui
