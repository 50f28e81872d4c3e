// keel app layer list: every layer with its current values, a trend and a health colour.
//
// What it is for: finding a layer by name or by how bad it looks. In model order the layers
// form a tree by module path (blocks > 0 > attn > qkv.weight: a leaf names its module too),
// folded as ui/module_rows.hpp says: a model of more than 1,000 tensors starts with every
// module folded, a smaller one open; the fold state is AppState's, shared with the heatmap.
// A folded module's row stands for its layers: its health is its worst layer's (red when any has a
// non-finite gradient, else orange when any looks off), its values are their largest (the sum
// of a count, such as their non-finite counts: wire::ModuleRollup), its trend the largest grad norm per step (RunModel::module_summarize); hovering names its worst
// layer now. Sorting by any metric column or typing a filter shows a flat list of layers
// instead, whose names drop the start every row shares. A name too wide for its column is
// shortened in the middle, never at its end, and hovering shows it whole. Each row: health
// (red: non-finite gradient; orange: a large update ratio or a mostly-zero gradient; green
// otherwise), the latest value of each metric the wire table places in the list
// (wire::kListColumnMetrics, in its order; a column whose style says so starts hidden, and a
// right click on the header shows it), and a grad-norm sparkline over the shared step range. Clicking a row selects the layer; clicking a module opens or folds it.
// Cost: only the rows on screen are drawn (a list clipper over the tree's visible rows or the
// flat list), folded modules cost nothing, and the flat list is filtered and sorted again only
// when the filter, the sort, the layers or (sorting by a value) the newest step changed, so
// 50,000 layers draw as fast as fifty.
// Threads: the UI thread, inside an ImGui window; fills the space it is given.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <imgui.h>

#include "model/run_model.hpp"
#include "ui/app_state.hpp"
#include "ui/module_rows.hpp"

namespace keel::app::ui {

class LayerList {
 public:
  void draw(const RunModel& run, AppState& state);
  // Layers in the order the list shows them (after filtering, sorting and folding), for the
  // up/down keys.
  const std::vector<int>& display_order() const { return order_; }

 private:
  // `name`: the row's text before fitting (the whole name, or the tree's leaf); its first
  // `shared_parts` components may be dropped when it is too wide (text_fit.hpp). `depth`: the
  // tree's indentation.
  void draw_row(const RunModel& run, AppState& state, int layer, const std::string& name, size_t shared_parts,
                int depth);
  void draw_module_row(const RunModel& run, AppState& state, const ModuleRow& row);
  void draw_tree(const RunModel& run, AppState& state);
  void draw_flat(const RunModel& run, AppState& state, int sort_column, bool ascending);

  ImGuiTextFilter filter_;
  std::vector<int> order_;
  ModuleRows tree_rows_{true};
  uint64_t order_rows_version_ = 0;   // the tree rows order_ was taken from
  // What the flat list was last built for; it is rebuilt when any of these changes.
  struct FlatKey {
    const RunModel* run = nullptr;
    size_t layers = 0;
    std::string filter;
    int sort_column = -1;
    bool ascending = true;
    int64_t step = -1;   // only when sorting by a value
    bool operator==(const FlatKey& other) const {
      return run == other.run && layers == other.layers && filter == other.filter &&
             sort_column == other.sort_column && ascending == other.ascending && step == other.step;
    }
  };
  FlatKey flat_key_;
  bool flat_shown_ = false;   // order_ holds the flat list (else the tree's layers)
  size_t flat_shared_parts_ = 0;
};

}  // namespace keel::app::ui
