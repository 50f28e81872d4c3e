#include "ui/module_rows.hpp"

#include <algorithm>

namespace keel::app::ui {

bool modules_start_open(const ModuleTree& tree) { return !starts_folded(tree.layer_count()); }

const std::vector<ModuleRow>& ModuleRows::rows(const ModuleTree& tree, const AppState& state) {
  if (computed_ && tree.version() == tree_version_ && state.folds_version() == folds_version_) return rows_;
  computed_ = true;
  tree_version_ = tree.version();
  folds_version_ = state.folds_version();
  ++version_;
  rows_.clear();
  const bool default_open = modules_start_open(tree);
  const size_t layers = tree.layer_count(), modules = tree.module_count();
  size_t module = 0, layer = 0;
  // Modules are in pre-order and never empty: those starting at `layer` are the next ones, each
  // inside the one before; a folded one is skipped with its layers and its descendants.
  while (layer < layers) {
    if (module < modules && tree.module(module).first_layer == layer) {
      const ModuleNode& node = tree.module(module);
      const bool open = state.module_open(node.path, default_open);
      if (!open || open_headers_) {
        rows_.push_back({true, open, node.depth, module, node.first_layer, node.end_layer});
      }
      if (open) {
        ++module;
      } else {
        layer = node.end_layer;
        module = node.end_module;
      }
      continue;
    }
    const size_t parent = tree.layer_parent(layer);
    const int depth = parent == ModuleTree::kNone ? 0 : tree.module(parent).depth + 1;
    rows_.push_back({false, false, depth, layer, layer, layer + 1});
    ++layer;
  }
  return rows_;
}

int ModuleRows::row_of_layer(size_t layer) const {
  // The last row starting at or before the layer: with open headers, the deepest of those
  // starting at it, which is the layer's own row or a folded module holding it.
  const auto after = std::upper_bound(rows_.begin(), rows_.end(), layer,
                                      [](size_t l, const ModuleRow& row) { return l < row.first_layer; });
  if (after == rows_.begin()) return -1;
  const auto at = after - 1;
  return layer < at->end_layer ? int(at - rows_.begin()) : -1;
}

void open_modules_of(const ModuleTree& tree, size_t layer, AppState& state) {
  if (layer >= tree.layer_count()) return;
  const bool default_open = modules_start_open(tree);
  for (size_t module = tree.layer_parent(layer); module != ModuleTree::kNone; module = tree.module(module).parent) {
    const std::string& path = tree.module(module).path;
    if (!state.module_open(path, default_open)) state.set_module_open(path, true);
  }
}

}  // namespace keel::app::ui
