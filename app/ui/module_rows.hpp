// keel app ModuleRows: the rows the layer tree shows under the fold state, for the layer list
// and the heatmap alike.
//
// What it is for: a model of tens of thousands of tensors is read by module. The rule for where
// a module starts: a model of more than kFoldAboveLayers (1,000, model/module_tree.hpp) tensors
// starts with every module folded (a mixture of experts: embed.weight, blocks, head.weight; one
// click per level down to an expert's three matrices); a smaller one starts with every module
// open, as a dense transformer's 1,000 layers still read well one row each. The user's opening
// and folding (AppState::set_module_open) overrides the rule for that module. The rows are
// computed once per change of the tree or the folds, walking the open modules only: a folded
// module's layers cost nothing.
// Threads: the UI thread.
// Never: touches ImGui or the model beyond reading the tree.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/module_tree.hpp"
#include "ui/app_state.hpp"

namespace keel::app::ui {

// Whether the modules of `tree` start open (the rule above).
bool modules_start_open(const ModuleTree& tree);

struct ModuleRow {
  bool module = false;      // a module's row, else a layer's
  bool open = false;        // a module's: shown open, its rows follow
  int depth = 0;            // nesting, 0 at the top
  size_t index = 0;         // the module's index in the tree, or the layer's
  size_t first_layer = 0;   // the layers the row stands for: [first_layer, end_layer)
  size_t end_layer = 0;
};

class ModuleRows {
 public:
  // `open_headers`: whether an open module has a row of its own (the list's tree header) or
  // none (the heatmap, whose rows are layers and folded modules, together every layer once).
  explicit ModuleRows(bool open_headers) : open_headers_(open_headers) {}

  // The rows, in model order; recomputed only when the tree or the folds changed.
  const std::vector<ModuleRow>& rows(const ModuleTree& tree, const AppState& state);
  // The index of the row that shows `layer` (its own row, or the folded module holding it), as
  // of the last rows(); -1 when there is none.
  int row_of_layer(size_t layer) const;
  // Bumped whenever rows() recomputed: what a caller derives its own caches from.
  uint64_t version() const { return version_; }

 private:
  bool open_headers_;
  std::vector<ModuleRow> rows_;
  uint64_t tree_version_ = 0;
  uint64_t folds_version_ = 0;
  bool computed_ = false;
  uint64_t version_ = 0;
};

// Opens every module holding `layer`, so that its own row shows (a selection made for the user,
// the first non-finite, must be visible in both views).
void open_modules_of(const ModuleTree& tree, size_t layer, AppState& state);

}  // namespace keel::app::ui
