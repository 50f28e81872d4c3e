#include "ui/run_picker.hpp"

#include <imgui.h>

#include <vector>

namespace keel::app::ui {

std::string run_label(const RunModel& run) {
  const std::string id = run.run_id().empty() ? "(attached mid-run)" : run.run_id();
  const std::string rank = " rank " + std::to_string(run.rank());
  return run.model().empty() ? id + rank : run.model() + " (" + id + ")" + rank;
}

const RunModel* draw_run_picker(const Model& model, const RunModel* shown) {
  const std::vector<const RunModel*> runs = model.current_runs();
  // The ranks of one job are chosen in the ranks view; the picker is for runs a rank cannot
  // tell apart.
  if (runs.size() <= model.ranks().size()) return nullptr;
  const RunModel* picked = nullptr;
  ImGui::TextUnformatted("showing");
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
  ImGui::SameLine();
  ImGui::TextDisabled("of %zu runs", runs.size());
  return picked;
}

}  // namespace keel::app::ui
