// ModuleTree: a run's layers grouped by module path, the structure behind folding.
//
// What it is for: a mixture-of-experts model has tens of thousands of tensors
// (blocks.17.experts.203.w1.weight); the dashboard shows them by module, folded, and a folded
// module stands for its tensors (RunModel's module queries). The tree is
// built from the layer names in model order, as named_parameters() lists them: a tensor's
// leaf is its last two components ("w1.weight", so a leaf reads as more than "weight"), the
// components before are modules. A module covers a contiguous range of layers; a path that
// comes back after other modules (parameters listed out of module order) is a second module of
// the same path, so every module stays one range. Modules are numbered in pre-order: a
// module's descendants are the modules after it up to end_module. A tree has at most
// max_modules() modules, as many as its layers (4,096 for a small model): a real model has
// far fewer (a mixture of experts one per three tensors), and names of hundreds of
// components cannot make a run's module series outweigh its layers'. Past the cap a layer's
// path stays whole in its leaf.
// Threads: a plain value; build and read it on one thread.
// Never: throws; allocates only in build().
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace keel::app {

// A model of more than kFoldAboveLayers tensors starts with every module folded
// (ui/module_rows.hpp). It is also where RunModel starts keeping module series: a folded module
// of such a model may hold tens of thousands of layers, too many to merge for every frame. A
// smaller model keeps none, so that its modules cost its layers no steps; its rows start open,
// and a module folded there by hand is merged from its layers when drawn: a block of a few
// tensors costs what their rows would, a module of all 1,000 about 10 ms a frame.
inline constexpr size_t kFoldAboveLayers = 1000;
inline bool starts_folded(size_t layers) { return layers > kFoldAboveLayers; }

struct ModuleNode {
  std::string path;         // "blocks.17.experts"
  size_t name_offset = 0;   // where its own component starts in `path` ("experts")
  size_t parent = 0;        // ModuleTree::kNone for a top-level module
  int depth = 0;            // 0 for a top-level module
  size_t first_layer = 0;   // its layers are [first_layer, end_layer), never empty
  size_t end_layer = 0;
  size_t end_module = 0;    // its descendants are modules (this, end_module)

  size_t layers() const { return end_layer - first_layer; }
  std::string name() const { return path.substr(name_offset); }
};

class ModuleTree {
 public:
  static constexpr size_t kNone = static_cast<size_t>(-1);
  static size_t max_modules(size_t layers) { return layers > 4096 ? layers : 4096; }

  // Rebuilds the tree for these layer names (model order). Each build gets a new version().
  void build(const std::vector<std::string>& layer_names);

  size_t module_count() const { return modules_.size(); }
  const ModuleNode& module(size_t index) const { return modules_[index]; }
  size_t layer_count() const { return layer_parent_.size(); }
  // The innermost module holding the layer; kNone for a top-level layer.
  size_t layer_parent(size_t layer) const { return layer_parent_[layer]; }
  // Where the layer's leaf ("w1.weight") starts in its name.
  size_t leaf_offset(size_t layer) const { return leaf_offset_[layer]; }
  // Distinct for every build of every tree: what a view caches its rows by.
  uint64_t version() const { return version_; }
  size_t bytes_used() const;

 private:
  std::vector<ModuleNode> modules_;
  std::vector<size_t> layer_parent_;
  std::vector<uint32_t> leaf_offset_;
  uint64_t version_ = 0;
};

}  // namespace keel::app
