#include "ui/events_view.hpp"

#include <string>

#include <imgui.h>

namespace keel::app::ui {
namespace {

ImVec4 kind_colour(const std::string& kind) {
  if (kind.rfind("first_nonfinite", 0) == 0) return ImVec4(1.0f, 0.35f, 0.35f, 1.0f);
  if (kind == "dump_failed") return ImVec4(1.0f, 0.35f, 0.35f, 1.0f);
  if (kind == "skip" || kind == "spike") return ImVec4(1.0f, 0.65f, 0.2f, 1.0f);
  return ImGui::GetStyleColorVec4(ImGuiCol_Text);
}

}  // namespace

int find_layer(const RunModel& run, const std::string& name) {
  for (size_t i = 0; i < run.layer_count(); ++i) {
    if (run.layer_name(i) == name) return int(i);
  }
  return -1;
}

void draw_events(const RunModel& run, AppState& state, const std::deque<CommandEntry>& commands) {
  const auto& events = run.events();
  if (events.empty() && commands.empty()) {
    ImGui::TextDisabled("no events");
    return;
  }
  const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY |
                                ImGuiTableFlags_Resizable | ImGuiTableFlags_BordersInnerV;
  if (!ImGui::BeginTable("events", 4, flags)) return;
  ImGui::TableSetupScrollFreeze(0, 1);
  ImGui::TableSetupColumn("step", ImGuiTableColumnFlags_WidthFixed, ImGui::GetFontSize() * 4);
  ImGui::TableSetupColumn("kind", ImGuiTableColumnFlags_WidthFixed, ImGui::GetFontSize() * 8);
  ImGui::TableSetupColumn("layer", ImGuiTableColumnFlags_WidthStretch, 1.0f);
  ImGui::TableSetupColumn("detail", ImGuiTableColumnFlags_WidthStretch, 1.2f);
  ImGui::TableHeadersRow();
  int row = 0;
  size_t next_event = 0, next_command = 0;
  while (next_event < events.size() || next_command < commands.size()) {
    // Both lists are newest first; the newer head goes next.
    const bool take_command =
        next_command < commands.size() &&
        (next_event >= events.size() ||
         commands[next_command].stamp_unix_ns >= events[next_event].stamp_unix_ns);
    ImGui::TableNextRow();
    ImGui::TableSetColumnIndex(0);
    ImGui::PushID(row++);
    if (take_command) {
      const CommandEntry& command = commands[next_command++];
      const std::string label = command.step >= 0 ? std::to_string(command.step) : std::string("-");
      const bool selected = command.step >= 0 && command.step == state.selected_step();
      if (ImGui::Selectable(label.c_str(), selected, ImGuiSelectableFlags_SpanAllColumns) &&
          command.step >= 0) {
        state.select(state.selected_layer(), state.selected_layer_name(), command.step);
      }
      ImGui::PopID();
      ImGui::TableSetColumnIndex(1);
      const ImVec4 colour = command.state == CommandState::kAcknowledged ? ImVec4(0.35f, 0.85f, 0.4f, 1.0f)
                                                                         : ImVec4(1.0f, 0.35f, 0.35f, 1.0f);
      ImGui::TextColored(colour, "%s %s", command.kind.c_str(), command_state_name(command.state));
      ImGui::TableSetColumnIndex(3);
      ImGui::TextUnformatted(command.text.c_str());
      if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", command.text.c_str());
      continue;
    }
    const wire::Event& event = events[next_event++];
    const bool selected = event.step == state.selected_step() &&
                          (event.layer.empty() || event.layer == state.selected_layer_name());
    const std::string label = std::to_string(event.step);
    if (ImGui::Selectable(label.c_str(), selected, ImGuiSelectableFlags_SpanAllColumns)) {
      const int layer = find_layer(run, event.layer);
      if (layer >= 0) {
        state.select(layer, event.layer, event.step);
      } else {
        // A watched tensor or a run-wide event: keep the layer, go to the step.
        state.select(state.selected_layer(), state.selected_layer_name(), event.step);
      }
    }
    ImGui::PopID();
    ImGui::TableSetColumnIndex(1);
    ImGui::TextColored(kind_colour(event.kind), "%s", event.kind.c_str());
    ImGui::TableSetColumnIndex(2);
    ImGui::TextUnformatted(event.layer.c_str());
    ImGui::TableSetColumnIndex(3);
    ImGui::TextUnformatted(event.detail.c_str());
    if (ImGui::IsItemHovered() && !event.detail.empty()) ImGui::SetTooltip("%s", event.detail.c_str());
  }
  ImGui::EndTable();
}

}  // namespace keel::app::ui
