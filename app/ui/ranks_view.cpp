#include "ui/ranks_view.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <imgui.h>

#include "model/rank_overview.hpp"
#include "model/run_model.hpp"
#include "ui/colormap.hpp"
#include "ui/plot.hpp"
#include "ui/verbose_log.hpp"

namespace keel::app::ui {
namespace {

constexpr float kMaxRowPx = 16.0f;
constexpr float kMinNonfinitePx = 4.0f;
constexpr ImU32 kShownRowColour = IM_COL32(255, 255, 255, 220);
const ImVec4 kAlarmText(1.0f, 0.35f, 0.35f, 1.0f);

}  // namespace

void RanksView::draw(const Model& model, const RunModel& shown, AppState& state) {
  ranks_ = model.ranks();
  if (ranks_.size() < 2) return;
  draw_title(model, state);
  const size_t layers = shown.layer_count();
  if (layers == 0) return;

  const float font = ImGui::GetFontSize();
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const float width = ImGui::GetContentRegionAvail().x;
  const float gutter = std::min(font * 12.0f, width * 0.3f);
  update_cells(model, shown, state, width - font * 0.5f - gutter);
  Strip strip;
  strip.layers = layers;
  strip.rows = ranks_.size() + (job_row_ ? 1 : 0);
  strip.row_px = std::clamp(std::floor(font * 6.0f / float(strip.rows)), 3.0f, kMaxRowPx);
  strip.min = ImVec2(origin.x + gutter, origin.y);
  strip.max = ImVec2(origin.x + width - font * 0.5f, origin.y + strip.row_px * float(strip.rows));
  ImGui::InvisibleButton("ranks", ImVec2(std::max(1.0f, width), strip.max.y - strip.min.y));
  const bool hovered = ImGui::IsItemHovered();
  draw_rows(model, shown, strip);
  char geometry[192];
  std::snprintf(geometry, sizeof geometry,
                "keel: ranks x0 %.0f x1 %.0f y0 %.0f row %.2f ranks %zu layers %zu job %d metric %s", strip.min.x,
                strip.max.x, strip.min.y, strip.row_px, ranks_.size(), layers, job_row_ ? 1 : 0,
                wire::info_of(state.heat_metric).name);
  log_once(logged_geometry_, geometry);
  if (hovered) hover_cell(model, shown, state, strip);
  ImGui::SetCursorScreenPos(ImVec2(origin.x, strip.max.y + font * 0.3f));
  ImGui::Separator();
}

void RanksView::draw_title(const Model& model, const AppState& state) {
  ImGui::Text("ranks x layers: %s, max over the view", wire::info_of(state.heat_metric).label);
  const std::optional<FirstNonfiniteRank> first = first_nonfinite_rank(model);
  if (!first) return;
  ImGui::SameLine();
  ImGui::TextColored(kAlarmText, "first non-finite: rank %d at step %lld, %s", first->rank,
                     static_cast<long long>(first->step), first->layer.c_str());
  char text[512];
  std::snprintf(text, sizeof text, "keel: first nonfinite rank %d step %lld layer %s", first->rank,
                static_cast<long long>(first->step), first->layer.c_str());
  log_once(logged_first_, text);
}

void RanksView::update_cells(const Model& model, const RunModel& shown, const AppState& state, float strip_px) {
  const size_t layers = shown.layer_count();
  const int64_t first_step = int64_t(std::floor(state.view_first())), last_step = int64_t(std::ceil(state.view_last()));
  // The cells, their image and its texture are remade only when something they show changed:
  // at 50,000 layers and two ranks that is 150,000 series summaries and a 600 KB upload, most
  // of a frame (keel-bench-app --sharded-ranks 2), while between steps nothing changes.
  const CellsKey key{model.revision(), state.heat_metric, first_step, last_step, layers, &shown,
                     int(std::ceil(kMinNonfinitePx * float(layers) / std::max(1.0f, strip_px)))};
  if (key == cells_key_ && texture_) return;
  cells_key_ = key;
  rank_layer_cells(model, ranks_, state.heat_metric, first_step, last_step, layers, cells_);
  // A sharded job's own row under its ranks': each layer's whole value of the heatmap's
  // metric, the ranks' shards combined (JobLayerValues).
  const JobLayerValues& job = model.job_layer_values();
  job_row_ = shown.described() && shown.description().sharded && job.world_size() == shown.description().world_size &&
             job_layer_cells(job, state.heat_metric, first_step, last_step, layers, job_cells_);
  if (job_row_) cells_.insert(cells_.end(), job_cells_.begin(), job_cells_.end());
  image_.build(cells_, ranks_.size() + (job_row_ ? 1 : 0), layers, key.min_nonfinite_columns);
  if (!texture_) texture_ = make_image_texture();
  texture_id_ = texture_->update(image_.pixels().data(), int(layers), int(ranks_.size() + (job_row_ ? 1 : 0)));
}

void RanksView::draw_rows(const Model& model, const RunModel& shown, const Strip& strip) {
  const float font = ImGui::GetFontSize();
  const float row_px = strip.row_px;
  ImDrawList* draw = ImGui::GetWindowDrawList();
  const float texel_v = 1.0f / float(strip.rows);
  for (size_t r = 0; r < strip.rows; ++r) {
    const float y0 = strip.min.y + float(r) * row_px, y1 = y0 + row_px - (row_px > 6 ? 1 : 0);
    const float v0 = float(r) * texel_v;
    draw->AddImage(texture_id_, ImVec2(strip.min.x, y0), ImVec2(strip.max.x, y1), ImVec2(0, v0),
                   ImVec2(1, v0 + texel_v));
    const bool is_job = r == ranks_.size();
    const bool is_shown = !is_job && model.current_run(ranks_[r]) == &shown;
    if (row_px >= font * 0.6f || is_shown || is_job) {
      char label[32];
      if (is_job) {
        std::snprintf(label, sizeof label, "job");
      } else {
        std::snprintf(label, sizeof label, "rank %d", ranks_[r]);
      }
      const ImVec2 size = ImGui::CalcTextSize(label);
      draw->AddText(ImVec2(strip.min.x - size.x - font * 0.3f, y0 + (row_px - size.y) * 0.5f),
                    is_shown || is_job ? IM_COL32(255, 255, 255, 255) : IM_COL32(150, 150, 160, 255), label);
    }
    if (is_shown) {
      draw->AddRect(ImVec2(strip.min.x - 2, y0 - 1), ImVec2(strip.max.x + 2, y0 + row_px), kShownRowColour);
    }
  }
}

void RanksView::hover_cell(const Model& model, const RunModel& shown, AppState& state, const Strip& strip) {
  const ImGuiIO& io = ImGui::GetIO();
  if (io.MousePos.x < strip.min.x || io.MousePos.x >= strip.max.x) return;
  const float column_px = (strip.max.x - strip.min.x) / float(strip.layers);
  const size_t r = std::min(strip.rows - 1, size_t(std::max(0.0f, (io.MousePos.y - strip.min.y) / strip.row_px)));
  const size_t l = std::min(strip.layers - 1, size_t((io.MousePos.x - strip.min.x) / column_px));
  const bool is_job = r == ranks_.size();
  const Summary& cell = cells_[r * strip.layers + l];
  ImGui::BeginTooltip();
  if (is_job) {
    ImGui::Text("job (%d ranks)  %s", model.job_layer_values().world_size(), shown.layer_name(l).c_str());
    ImGui::TextDisabled("the ranks' shards combined: the whole parameter's");
  } else {
    ImGui::Text("rank %d  %s", ranks_[r], shown.layer_name(l).c_str());
  }
  if (cell.has_finite()) {
    ImGui::Text("%s in view: %s .. %s", wire::info_of(state.heat_metric).label, format_value(cell.min).c_str(),
                format_value(cell.max).c_str());
  } else if (!cell.has_data()) {
    ImGui::TextDisabled("no data in view");
  }
  if (cell.has_nonfinite()) ImGui::TextColored(kAlarmText, "non-finite values");
  ImGui::TextDisabled(is_job ? "click: select this layer" : "click: show this rank and layer");
  ImGui::EndTooltip();
  if (ImGui::IsMouseReleased(ImGuiMouseButton_Left) && io.MouseDragMaxDistanceSqr[0] < 16.0f) {
    if (!is_job) state.show_rank(ranks_[r]);
    state.select_layer(int(l), shown.layer_name(l));
  }
}

void RanksView::log_once(std::string& logged, const std::string& text) {
  if (logged == text) return;
  logged = text;
  verbose_log("%s", text.c_str());
}

}  // namespace keel::app::ui
