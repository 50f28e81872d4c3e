// keel app layer list: every layer with its current values, a trend and a health colour.
//
// What it is for: finding a layer by name or by how bad it looks. In model order the layers
// form a tree by module path (blocks > 0 > attn > qkv.weight: a leaf names its module too);
// sorting by any metric column or typing a filter shows a flat list instead, whose names drop
// the start every row shares. A name too wide for its column is shortened in the middle, never
// at its end, and hovering shows it whole. Each row: health (red: non-finite gradient;
// orange: a large update ratio or a mostly-zero gradient; green otherwise), latest grad norm,
// update ratio, absmax and zero fraction (hidden at first; a right click on the header shows
// them), non-finite count, and a grad-norm sparkline over the shared step range. Clicking a
// row selects the layer.
// Threads: the UI thread, inside an ImGui window; fills the space it is given.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <imgui.h>

#include "model/run_model.hpp"
#include "ui/app_state.hpp"

namespace keel::app::ui {

class LayerList {
 public:
  void draw(const RunModel& run, AppState& state);
  // Layers in the order the list shows them (after filtering and sorting), for up/down keys.
  const std::vector<int>& display_order() const { return order_; }

 private:
  // `name`: the row's text before fitting (the whole name, or the tree's leaf); its first
  // `shared_parts` components may be dropped when it is too wide (text_fit.hpp).
  void draw_row(const RunModel& run, AppState& state, int layer, const std::string& name, size_t shared_parts);

  ImGuiTextFilter filter_;
  std::vector<int> order_;
};

}  // namespace keel::app::ui
