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
  const size_t layers = shown.layer_count();
  const std::optional<FirstNonfiniteRank> first = first_nonfinite_rank(model);

  ImGui::Text("ranks x layers: %s, max over the view", wire::info_of(state.heat_metric).label);
  if (first) {
    ImGui::SameLine();
    ImGui::TextColored(kAlarmText, "first non-finite: rank %d at step %lld, %s", first->rank,
                       static_cast<long long>(first->step), first->layer.c_str());
    char text[512];
    std::snprintf(text, sizeof text, "keel: first nonfinite rank %d step %lld layer %s", first->rank,
                  static_cast<long long>(first->step), first->layer.c_str());
    log_once(logged_first_, text);
  }
  if (layers == 0) return;

  const float font = ImGui::GetFontSize();
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const float width = ImGui::GetContentRegionAvail().x;
  const int64_t first_step = int64_t(std::floor(state.view_first())), last_step = int64_t(std::ceil(state.view_last()));
  const JobLayerValues& job = model.job_layer_values();
  const float gutter = std::min(font * 12.0f, width * 0.3f);
  const float strip_px = width - font * 0.5f - gutter;
  // The cells, their image and its texture are remade only when something they show changed:
  // at 50,000 layers and two ranks that is 150,000 series summaries and a 600 KB upload, most
  // of a frame (keel-bench-app --sharded-ranks 2), while between steps nothing changes.
  const CellsKey key{model.revision(), state.heat_metric, first_step, last_step, layers, &shown,
                     int(std::ceil(kMinNonfinitePx * float(layers) / std::max(1.0f, strip_px)))};
  if (!(key == cells_key_) || !texture_) {
    cells_key_ = key;
    rank_layer_cells(model, ranks_, state.heat_metric, first_step, last_step, layers, cells_);
    // A sharded job's own row under its ranks': each layer's whole value of the heatmap's
    // metric, the ranks' shards combined (JobLayerValues).
    job_row_ = shown.described() && shown.description().sharded && job.world_size() == shown.description().world_size &&
               job_layer_cells(job, state.heat_metric, first_step, last_step, layers, job_cells_);
    if (job_row_) cells_.insert(cells_.end(), job_cells_.begin(), job_cells_.end());
    image_.build(cells_, ranks_.size() + (job_row_ ? 1 : 0), layers, key.min_nonfinite_columns);
    if (!texture_) texture_ = make_image_texture();
    texture_id_ = texture_->update(image_.pixels().data(), int(layers), int(ranks_.size() + (job_row_ ? 1 : 0)));
  }
  const bool job_row = job_row_;
  const size_t rows = ranks_.size() + (job_row ? 1 : 0);
  const ImTextureID texture = texture_id_;

  const float row_px = std::clamp(std::floor(font * 6.0f / float(rows)), 3.0f, kMaxRowPx);
  const ImVec2 min(origin.x + gutter, origin.y);
  const ImVec2 max(origin.x + width - font * 0.5f, origin.y + row_px * float(rows));
  ImGui::InvisibleButton("ranks", ImVec2(std::max(1.0f, width), max.y - min.y));
  const bool hovered = ImGui::IsItemHovered();
  const float column_px = (max.x - min.x) / float(layers);

  ImDrawList* draw = ImGui::GetWindowDrawList();
  const float texel_v = 1.0f / float(rows);
  for (size_t r = 0; r < rows; ++r) {
    const float y0 = min.y + float(r) * row_px, y1 = y0 + row_px - (row_px > 6 ? 1 : 0);
    const float v0 = float(r) * texel_v;
    draw->AddImage(texture, ImVec2(min.x, y0), ImVec2(max.x, y1), ImVec2(0, v0), ImVec2(1, v0 + texel_v));
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
      draw->AddText(ImVec2(min.x - size.x - font * 0.3f, y0 + (row_px - size.y) * 0.5f),
                    is_shown || is_job ? IM_COL32(255, 255, 255, 255) : IM_COL32(150, 150, 160, 255), label);
    }
    if (is_shown) draw->AddRect(ImVec2(min.x - 2, y0 - 1), ImVec2(max.x + 2, y0 + row_px), kShownRowColour);
  }
  char geometry[192];
  std::snprintf(geometry, sizeof geometry,
                "keel: ranks x0 %.0f x1 %.0f y0 %.0f row %.2f ranks %zu layers %zu job %d metric %s", min.x, max.x,
                min.y, row_px, ranks_.size(), layers, job_row ? 1 : 0,
                wire::info_of(state.heat_metric).name);
  log_once(logged_geometry_, geometry);

  const ImGuiIO& io = ImGui::GetIO();
  if (hovered && io.MousePos.x >= min.x && io.MousePos.x < max.x) {
    const size_t r = std::min(rows - 1, size_t(std::max(0.0f, (io.MousePos.y - min.y) / row_px)));
    const size_t l = std::min(layers - 1, size_t((io.MousePos.x - min.x) / column_px));
    const bool is_job = r == ranks_.size();
    const Summary& cell = cells_[r * layers + l];
    ImGui::BeginTooltip();
    if (is_job) {
      ImGui::Text("job (%d ranks)  %s", job.world_size(), shown.layer_name(l).c_str());
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
  ImGui::SetCursorScreenPos(ImVec2(origin.x, max.y + font * 0.3f));
  ImGui::Separator();
}

void RanksView::log_once(std::string& logged, const std::string& text) {
  if (logged == text) return;
  logged = text;
  verbose_log("%s", text.c_str());
}

}  // namespace keel::app::ui
