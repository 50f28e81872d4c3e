#include "ui/run_picker.hpp"

#include <imgui.h>

#include <cstdio>
#include <vector>

#include "ui/verbose_log.hpp"

namespace keel::app::ui {

std::string run_label(const RunModel& run) {
  const std::string id = run.run_id().empty() ? "(attached mid-run)" : run.run_id();
  const std::string rank = " rank " + std::to_string(run.rank());
  return run.model().empty() ? id + rank : run.model() + " (" + id + ")" + rank;
}

void RunPicker::log_geometry(const std::string& name) {
  const ImVec2 min = ImGui::GetItemRectMin(), max = ImGui::GetItemRectMax();
  char rect[96];
  std::snprintf(rect, sizeof rect, " x0 %.0f y0 %.0f x1 %.0f y1 %.0f", min.x, min.y, max.x, max.y);
  std::string& logged = logged_[name];
  if (logged == rect) return;
  logged = rect;
  verbose_log("keel: control %s%s", name.c_str(), rect);
}

const RunModel* RunPicker::draw(const Model& model, const RunModel* shown) {
  const std::vector<const RunModel*> runs = model.current_runs();
  // The ranks of one job are chosen in the ranks view; the picker is for runs a rank cannot
  // tell apart.
  if (runs.size() <= model.ranks().size()) return nullptr;
  const RunModel* picked = nullptr;
  ImGui::AlignTextToFramePadding();
  ImGui::TextUnformatted("showing");
  if (runs.size() <= kRunsAsButtons) {
    // A GAN's two models, actor and critic: every run in sight, one click away.
    for (const RunModel* run : runs) {
      ImGui::SameLine();
      ImGui::PushID(run);
      const std::string label = run_label(*run);
      if (ImGui::RadioButton(label.c_str(), run == shown) && run != shown) picked = run;
      log_geometry("run " + label);
      ImGui::PopID();
    }
  } else {
    ImGui::SameLine();
    ImGui::SetNextItemWidth(ImGui::GetFontSize() * 28);
    const std::string preview = shown ? run_label(*shown) : std::string("(none)");
    if (ImGui::BeginCombo("##run", preview.c_str())) {
      for (const RunModel* run : runs) {
        ImGui::PushID(run);
        if (ImGui::Selectable(run_label(*run).c_str(), run == shown) && run != shown) picked = run;
        ImGui::PopID();
      }
      ImGui::EndCombo();
    }
  }
  ImGui::SameLine();
  ImGui::TextDisabled("of %zu runs", runs.size());
  return picked;
}

}  // namespace keel::app::ui
