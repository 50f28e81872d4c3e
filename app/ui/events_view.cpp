#include "ui/events_view.hpp"

#include <string>
#include <vector>

#include <imgui.h>

#include "keel/wire/vocabulary.hpp"
#include "model/event_rows.hpp"
#include "model/first_cause.hpp"
#include "ui/fonts.hpp"
#include "ui/instability_focus.hpp"
#include "ui/text_fit.hpp"
#include "ui/verbose_log.hpp"

namespace keel::app::ui {
namespace {

ImVec4 kind_colour(const std::string& kind) {
  namespace kinds = wire::event_kind;
  if (kind == kinds::kFirstNonfinite || kind == kinds::kFirstNonfiniteWatch || kind == kinds::kDumpFailed) {
    return ImVec4(1.0f, 0.35f, 0.35f, 1.0f);
  }
  if (kind == kinds::kSkip || kind == kinds::kSpike) return ImVec4(1.0f, 0.65f, 0.2f, 1.0f);
  // The warning banner's amber (ui/warning_banner.cpp).
  if (kind == kinds::kWarning) return ImVec4(1.0f, 0.75f, 0.16f, 1.0f);
  return ImGui::GetStyleColorVec4(ImGuiCol_Text);
}

float text_width(const std::string& text) { return ImGui::CalcTextSize(text.c_str()).x; }

// The notice's height wrapped to the pane, with its copy button's line when it has one.
float notice_height(const std::string& notice) {
  const ImGuiStyle& style = ImGui::GetStyle();
  const float wrap = ImGui::GetContentRegionAvail().x;
  return ImGui::CalcTextSize(notice.c_str(), nullptr, false, wrap).y + ImGui::GetFrameHeightWithSpacing() +
         style.ItemSpacing.y * 2;
}

void draw_event_table(const RunModel& run, AppState& state, const std::deque<CommandEntry>& commands,
                      const std::vector<EventRow>& rows, float height);

}  // namespace

int find_layer(const RunModel& run, const std::string& name) {
  for (size_t i = 0; i < run.layer_count(); ++i) {
    if (run.layer_name(i) == name) return int(i);
  }
  return -1;
}

std::string before_history_notice(int64_t step, int64_t first_kept, const std::string& dump) {
  std::string text = "Step " + std::to_string(step) + " is older than the history kept here (from step " +
                     std::to_string(first_kept) +
                     "). The run's recording holds it: its file under keel-runs/ in the trainer's working directory";
  text += dump.empty() ? "." : "; and so does the dump written at that step: " + dump;
  return text;
}

void copy_button(const char* label, const std::string& text) {
  if (!ImGui::SmallButton(label)) return;
  ImGui::SetClipboardText(text.c_str());
  // Read back through the window system, so the log says what a paste would give.
  const char* copied = ImGui::GetClipboardText();
  verbose_log("keel: copied %s", copied ? copied : "");
}

void draw_events(const RunModel& run, AppState& state, const std::deque<CommandEntry>& commands) {
  // Why the run's first unsafe step was unsafe, in the probe's one sentence, above every row.
  if (const std::optional<wire::Event>& first = run.first_nonfinite(); first && first->cause) {
    ImGui::PushStyleColor(ImGuiCol_Text, kind_colour(first->kind));
    ImGui::TextWrapped("%s", cause_sentence(*first).c_str());
    ImGui::PopStyleColor();
    ImGui::Separator();
  }
  // A step gone to that the views cannot show: said under the rows, in a place of its own, so
  // that the rows do not move under the mouse when it appears.
  std::string notice;
  if (const int64_t step = state.step_before_history(); step >= 0 && run.has_steps()) {
    notice = before_history_notice(step, run.first_step(), dump_path_at(run.events(), step));
  }
  const std::vector<EventRow> rows = event_rows(run.events(), run.first_nonfinite());
  if (rows.empty() && commands.empty()) {
    ImGui::TextDisabled("no events");
  } else {
    draw_event_table(run, state, commands, rows, notice.empty() ? 0.0f : -notice_height(notice));
  }
  if (!notice.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1.0f, 0.65f, 0.2f, 1.0f));
    ImGui::TextWrapped("%s", notice.c_str());
    ImGui::PopStyleColor();
    if (const std::string dump = dump_path_at(run.events(), state.step_before_history()); !dump.empty()) {
      copy_button("copy dump path##notice", dump);
    }
  }
}

namespace {

void draw_event_table(const RunModel& run, AppState& state, const std::deque<CommandEntry>& commands,
                      const std::vector<EventRow>& rows, float height) {
  const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY |
                                ImGuiTableFlags_Resizable | ImGuiTableFlags_BordersInnerV;
  if (!ImGui::BeginTable("events", 4, flags, ImVec2(0, height))) return;
  ImGui::TableSetupScrollFreeze(0, 1);
  ImGui::TableSetupColumn("step", ImGuiTableColumnFlags_WidthFixed, ImGui::GetFontSize() * 3.2f);
  ImGui::TableSetupColumn("event", ImGuiTableColumnFlags_WidthStretch, 0.9f);
  ImGui::TableSetupColumn("layer", ImGuiTableColumnFlags_WidthStretch, 0.9f);
  // The detail wraps in its column: a dump's path, a cause, a refusal are read whole.
  ImGui::TableSetupColumn("detail", ImGuiTableColumnFlags_WidthStretch, 2.2f);
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
      if (ImGui::Selectable(label.c_str(), selected, ImGuiSelectableFlags_SpanAllColumns | ImGuiSelectableFlags_AllowItemOverlap) &&
          command.step >= 0) {
        go_to(run, state, command.step, state.selected_layer_name());
      }
      if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s %s\n%s", command.kind.c_str(), command_state_name(command.state), command.text.c_str());
      ImGui::TableSetColumnIndex(1);
      const ImVec4 colour = command.state == CommandState::kAcknowledged ? ImVec4(0.35f, 0.85f, 0.4f, 1.0f)
                                                                         : ImVec4(1.0f, 0.35f, 0.35f, 1.0f);
      ImGui::TextColored(colour, "%s %s", command.kind.c_str(), command_state_name(command.state));
      ImGui::TableSetColumnIndex(3);
      ImGui::TextWrapped("%s", command.text.c_str());
      if (!command.path.empty()) copy_button("copy path", command.path);
      ImGui::PopID();
      continue;
    }
    const EventRow& row = rows[next_row++];
    const wire::Event& event = *row.newest;
    const bool selected = row.first_step <= state.selected_step() && state.selected_step() <= row.last_step &&
                          (event.layer.empty() || event.layer == state.selected_layer_name());
    const std::string label = std::to_string(event.step);
    const std::string title = event_row_title(row);
    if (ImGui::Selectable(label.c_str(), selected, ImGuiSelectableFlags_SpanAllColumns | ImGuiSelectableFlags_AllowItemOverlap)) {
      // A folded row goes to where it began: the first step skipped. A watched tensor or a
      // run-wide event keeps the layer and goes to the step. Every view moves there.
      go_to(run, state, row.first_step, event.layer);
      if (find_layer(run, event.layer) >= 0) state.request_scroll_to_selection();
    }
    // The whole text, whatever the columns' widths.
    if (ImGui::IsItemHovered()) {
      ImGui::SetTooltip("%s%s at step %lld%s%s\n%s", row.pinned ? "pinned: " : "", title.c_str(),
                        static_cast<long long>(event.step), event.layer.empty() ? "" : ", layer ",
                        event.layer.c_str(), event.detail.c_str());
    }
    ImGui::TableSetColumnIndex(1);
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextColored(kind_colour(event.kind), "%s", title.c_str());
    ImGui::PopTextWrapPos();
    ImGui::TableSetColumnIndex(2);
    // Cut in the middle when narrow (the parameter at its end tells layers apart).
    ImGui::TextUnformatted(fit_layer_name(event.layer, 0, ImGui::GetContentRegionAvail().x, text_width, ellipsis()).c_str());
    ImGui::TableSetColumnIndex(3);
    ImGui::TextWrapped("%s", event.detail.c_str());
    if (const std::string path = dump_path(event); !path.empty()) copy_button("copy path", path);
    ImGui::PopID();
  }
  ImGui::EndTable();
}

}  // namespace

}  // namespace keel::app::ui
