// keel app ranks view: a data-parallel job's ranks x layers, and the first rank to go
// non-finite (DESIGN §5).
//
// What it is for: with one endpoint per rank, the panes below show one rank's run; this strip
// shows every rank at once, one row per rank and one column per layer (model order), colour =
// log10 of the heatmap's metric over the steps in view (the max, so a spike does not fade),
// NaN/Inf in the heatmap's non-finite colour. A replica whose layer diverges from the others
// stands out as one odd cell in its column, and the title names the rank whose gradients went
// non-finite first. A click on a row shows that rank in every pane (and selects the layer
// clicked). A sharded job's strip has one more row under the ranks', "job": each layer's
// whole value of the heatmap's metric, the ranks' shards combined (Model::job_layer_values);
// a click on it selects the layer. Drawn only when two or more ranks have sent telemetry.
// It logs, once per change, where its rows are and what they show ("keel: ranks ... job 0|1
// metric NAME") and the first non-finite rank ("keel: first nonfinite rank R step S layer L"),
// so a test driving the real window can check and click them. Its cells are remade only when
// the model's revision, the metric, the steps in view or the shown run change.
// Threads: the UI thread, inside an ImGui window.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <imgui.h>

#include "model/model.hpp"
#include "model/value_summary.hpp"
#include "ui/app_state.hpp"
#include "ui/heatmap_image.hpp"
#include "ui/image_texture.hpp"

namespace keel::app::ui {

class RanksView {
 public:
  // Draws the strip for `model`'s ranks with the layers of `shown` (the run the panes show).
  // Does nothing, and takes no space, with fewer than two ranks.
  void draw(const Model& model, const RunModel& shown, AppState& state);

 private:
  // Where the strip is drawn: its image's corners, rows (ranks, then the job's) and layers.
  struct Strip {
    ImVec2 min, max;
    float row_px = 0;
    size_t rows = 0, layers = 0;
  };

  // The metric and, once some rank went non-finite, which one first (logged once).
  void draw_title(const Model& model, const AppState& state);
  // Remakes the cells, the image and its texture when what they show changed (CellsKey);
  // `strip_px` is the strip's width, over which a NaN cell is widened to kMinNonfinitePx.
  void update_cells(const Model& model, const RunModel& shown, const AppState& state, float strip_px);
  // Each row's image, its label, and a frame around the shown rank's.
  void draw_rows(const Model& model, const RunModel& shown, const Strip& strip);
  // The tooltip of the cell under the mouse; a click shows its rank and selects its layer.
  void hover_cell(const Model& model, const RunModel& shown, AppState& state, const Strip& strip);
  void log_once(std::string& logged, const std::string& text);

  // What the cells were made from: the model's revision (ranks, runs and values), the metric,
  // the steps in view, the shown run's layers and how many columns a NaN cell is widened to.
  struct CellsKey {
    uint64_t revision = 0;
    wire::LayerMetric metric = wire::LayerMetric::kGradNorm;
    int64_t first_step = 0, last_step = -1;
    size_t layers = 0;
    const RunModel* shown = nullptr;
    int min_nonfinite_columns = 0;
    bool operator==(const CellsKey& o) const {
      return revision == o.revision && metric == o.metric && first_step == o.first_step &&
             last_step == o.last_step && layers == o.layers && shown == o.shown &&
             min_nonfinite_columns == o.min_nonfinite_columns;
    }
  };

  std::vector<int32_t> ranks_;
  std::vector<Summary> cells_;       // rank rows, then the job's row when drawn
  std::vector<Summary> job_cells_;
  bool job_row_ = false;
  CellsKey cells_key_;
  HeatmapImage image_;
  std::unique_ptr<ImageTexture> texture_;
  ImTextureID texture_id_ = nullptr;
  std::string logged_geometry_;
  std::string logged_first_;
};

}  // namespace keel::app::ui
