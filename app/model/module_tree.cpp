#include "model/module_tree.hpp"

#include <algorithm>
#include <atomic>
#include <string_view>

namespace keel::app {
namespace {

// A layer name's components as views into it: "blocks.0.mlp.fc.weight" -> blocks, 0, mlp, ...
void split_dotted(std::string_view name, std::vector<std::string_view>& parts) {
  parts.clear();
  size_t start = 0;
  while (true) {
    const size_t dot = name.find('.', start);
    parts.push_back(name.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start));
    if (dot == std::string_view::npos) return;
    start = dot + 1;
  }
}

// The leaf is the parameter with its module ("fc.weight"): a row reading "weight" alone says
// nothing.
constexpr size_t kLeafParts = 2;

std::string_view own_name(const ModuleNode& node) { return std::string_view(node.path).substr(node.name_offset); }

uint64_t next_version() {
  static std::atomic<uint64_t> versions{0};
  return ++versions;
}

}  // namespace

void ModuleTree::build(const std::vector<std::string>& layer_names) {
  modules_.clear();
  layer_parent_.assign(layer_names.size(), kNone);
  leaf_offset_.assign(layer_names.size(), 0);
  version_ = next_version();
  std::vector<size_t> open;   // the modules holding the current layer, outermost first
  std::vector<std::string_view> parts;
  const auto close_to = [&](size_t depth, size_t layer) {
    while (open.size() > depth) {
      modules_[open.back()].end_layer = layer;
      modules_[open.back()].end_module = modules_.size();
      open.pop_back();
    }
  };
  for (size_t layer = 0; layer < layer_names.size(); ++layer) {
    const std::string& name = layer_names[layer];
    split_dotted(name, parts);
    const size_t module_parts = parts.size() - std::min(kLeafParts, parts.size());
    size_t common = 0;
    while (common < open.size() && common < module_parts && own_name(modules_[open[common]]) == parts[common]) {
      ++common;
    }
    close_to(common, layer);
    for (size_t i = common; i < module_parts && modules_.size() < max_modules(layer_names.size()); ++i) {
      ModuleNode node;
      node.name_offset = size_t(parts[i].data() - name.data());
      node.path = name.substr(0, node.name_offset + parts[i].size());
      node.parent = open.empty() ? kNone : open.back();
      node.depth = int(i);
      node.first_layer = layer;
      open.push_back(modules_.size());
      modules_.push_back(std::move(node));
    }
    layer_parent_[layer] = open.empty() ? kNone : open.back();
    // Past the cap on modules the rest of the path stays in the leaf's name.
    leaf_offset_[layer] = uint32_t(parts[open.size()].data() - name.data());
  }
  close_to(0, layer_names.size());
}

size_t ModuleTree::bytes_used() const {
  size_t bytes = sizeof(*this) + modules_.capacity() * sizeof(ModuleNode) + layer_parent_.capacity() * sizeof(size_t) +
                 leaf_offset_.capacity() * sizeof(uint32_t);
  for (const ModuleNode& node : modules_) bytes += node.path.capacity() > 15 ? node.path.capacity() + 1 : 0;
  return bytes;
}

}  // namespace keel::app
