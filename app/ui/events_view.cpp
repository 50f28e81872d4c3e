#include "ui/events_view.hpp"

#include <string>
#include <vector>

#include <imgui.h>

#include "model/event_rows.hpp"
#include "model/first_cause.hpp"

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
  // Why the run's first unsafe step was unsafe, in the probe's one sentence, above every row.
  if (const std::optional<wire::Event>& first = run.first_nonfinite(); first && first->cause) {
    ImGui::PushStyleColor(ImGuiCol_Text, kind_colour(first->kind));
    ImGui::TextWrapped("%s", cause_sentence(*first).c_str());
    ImGui::PopStyleColor();
    ImGui::Separator();
  }
  const std::vector<EventRow> rows = event_rows(run.events(), run.first_nonfinite());
  if (rows.empty() && commands.empty()) {
    ImGui::TextDisabled("no events");
    return;
  }
  const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY |
                                ImGuiTableFlags_Resizable | ImGuiTableFlags_BordersInnerV;
  if (!ImGui::BeginTable("events", 4, flags)) return;
  ImGui::TableSetupScrollFreeze(0, 1);
  ImGui::TableSetupColumn("step", ImGuiTableColumnFlags_WidthFixed, ImGui::GetFontSize() * 4);
  ImGui::TableSetupColumn("event", ImGuiTableColumnFlags_WidthStretch, 1.0f);
  ImGui::TableSetupColumn("layer", ImGuiTableColumnFlags_WidthStretch, 1.0f);
  ImGui::TableSetupColumn("detail", ImGuiTableColumnFlags_WidthStretch, 1.6f);
  ImGui::TableHeadersRow();
  int id = 0;
  size_t next_row = 0, next_command = 0;
  while (next_row < rows.size() || next_command < commands.size()) {
    // Both lists are newest first; the newer head goes next. The pinned row goes first.
    const bool take_command =
        next_command < commands.size() &&
        (next_row >= rows.size() ||
         (!rows[next_row].pinned && commands[next_command].stamp_unix_ns >= rows[next_row].newest->stamp_unix_ns));
    ImGui::TableNextRow();
    ImGui::TableSetColumnIndex(0);
    ImGui::PushID(id++);
    if (take_command) {
      const CommandEntry& command = commands[next_command++];
      const std::string label = command.step >= 0 ? std::to_string(command.step) : std::string("-");
      const bool selected = command.step >= 0 && command.step == state.selected_step();
      if (ImGui::Selectable(label.c_str(), selected, ImGuiSelectableFlags_SpanAllColumns) &&
          command.step >= 0) {
        state.select(state.selected_layer(), state.selected_layer_name(), command.step);
      }
      if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s %s\n%s", command.kind.c_str(), command_state_name(command.state), command.text.c_str());
      ImGui::PopID();
      ImGui::TableSetColumnIndex(1);
      const ImVec4 colour = command.state == CommandState::kAcknowledged ? ImVec4(0.35f, 0.85f, 0.4f, 1.0f)
                                                                         : ImVec4(1.0f, 0.35f, 0.35f, 1.0f);
      ImGui::TextColored(colour, "%s %s", command.kind.c_str(), command_state_name(command.state));
      ImGui::TableSetColumnIndex(3);
      ImGui::TextUnformatted(command.text.c_str());
      continue;
    }
    const EventRow& row = rows[next_row++];
    const wire::Event& event = *row.newest;
    const bool selected = row.first_step <= state.selected_step() && state.selected_step() <= row.last_step &&
                          (event.layer.empty() || event.layer == state.selected_layer_name());
    const std::string label = std::to_string(event.step);
    const std::string title = event_row_title(row);
    if (ImGui::Selectable(label.c_str(), selected, ImGuiSelectableFlags_SpanAllColumns)) {
      // A folded row goes to where it began: the first step skipped.
      const int64_t step = row.first_step;
      const int layer = find_layer(run, event.layer);
      if (layer >= 0) {
        state.select(layer, event.layer, step);
      } else {
        // A watched tensor or a run-wide event: keep the layer, go to the step.
        state.select(state.selected_layer(), state.selected_layer_name(), step);
      }
    }
    // The whole text, whatever the columns' widths.
    if (ImGui::IsItemHovered()) {
      ImGui::SetTooltip("%s%s at step %lld%s%s\n%s", row.pinned ? "pinned: " : "", title.c_str(),
                        static_cast<long long>(event.step), event.layer.empty() ? "" : ", layer ",
                        event.layer.c_str(), event.detail.c_str());
    }
    ImGui::PopID();
    ImGui::TableSetColumnIndex(1);
    ImGui::TextColored(kind_colour(event.kind), "%s", title.c_str());
    ImGui::TableSetColumnIndex(2);
    ImGui::TextUnformatted(event.layer.c_str());
    ImGui::TableSetColumnIndex(3);
    ImGui::TextUnformatted(event.detail.c_str());
  }
  ImGui::EndTable();
}

}  // namespace keel::app::ui
