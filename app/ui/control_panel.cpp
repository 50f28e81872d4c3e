#include "ui/control_panel.hpp"

#include <cstdio>
#include <optional>
#include <utility>

#include <imgui.h>
#include <imgui_internal.h>  // ImGuiItemFlags_MixedValue: a checkbox that shows "unknown"

#include "keel/wire/vocabulary.hpp"
#include "ui/command_targets.hpp"
#include "ui/events_view.hpp"
#include "ui/rewind_target.hpp"
#include "ui/fonts.hpp"
#include "ui/key_presses.hpp"
#include "ui/text_fit.hpp"
#include "ui/verbose_log.hpp"

namespace keel::app::ui {
namespace {

ImVec4 status_colour(CommandState state) {
  switch (state) {
    case CommandState::kAcknowledged: return ImVec4(0.35f, 0.85f, 0.4f, 1.0f);
    case CommandState::kRefused: return ImVec4(1.0f, 0.35f, 0.35f, 1.0f);
    case CommandState::kTimedOut: return ImVec4(0.95f, 0.7f, 0.2f, 1.0f);
    case CommandState::kPending: break;
  }
  return ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled);
}

float text_width(const std::string& text) { return ImGui::CalcTextSize(text.c_str()).x; }

// Prints where a button is ("keel: control skip x0 8 y0 28 x1 130 y1 47", window pixels) when it
// first shows or moves, so a test (or a user scripting xdotool) can click it.
void log_geometry(const char* name, std::array<float, 4>& logged) {
  const ImVec2 min = ImGui::GetItemRectMin(), max = ImGui::GetItemRectMax();
  const std::array<float, 4> rect{min.x, min.y, max.x, max.y};
  if (rect == logged) return;
  logged = rect;
  verbose_log("keel: control %s x0 %.0f y0 %.0f x1 %.0f y1 %.0f", name, min.x, min.y, max.x, max.y);
}

void separator() {
  ImGui::SameLine();
  ImGui::TextDisabled("|");
  ImGui::SameLine();
}

void log_click(const std::string& what) {
  verbose_log("keel: clicked %s", what.c_str());
}

const char* policy_state_name(PolicyState state) {
  switch (state) {
    case PolicyState::kOn: return "on";
    case PolicyState::kOff: return "off";
    case PolicyState::kUnknown: break;
  }
  return "unknown";
}

// A confirmation's modal: opened when asked (`requested`, then cleared), and begun. `opened`
// says it opened this frame (its field takes the keyboard). False while it is not shown.
bool begin_confirmation(const char* title, bool& requested, bool& opened) {
  opened = std::exchange(requested, false);
  if (opened) ImGui::OpenPopup(title);
  return ImGui::BeginPopupModal(title, nullptr, ImGuiWindowFlags_AlwaysAutoResize);
}

}  // namespace

void ControlPanel::draw(const Model& model, const RunModel* run, const FrameInput& input) {
  const std::vector<EndpointState>& links = input.links;
  if (run != run_seen_) {
    run_seen_ = run;
    state_.new_run();
  }
  if (run) {
    state_.note_events(run->events());
    state_.note_description(run->description());
  }
  read_outcomes(input);

  ImGui::BeginDisabled(run == nullptr || links.empty());
  if (ImGui::Button("Skip next update")) {
    log_click("Skip next update");
    keel::wire::Command skip;
    skip.kind = wire::command_kind::kSkip;
    skip.count = 1;
    send_every_rank("skip", skip, model, links, *run);
  }
  if (ImGui::IsItemHovered()) {
    ImGui::SetTooltip(every_rank(links).size() > 1
                          ? "Every rank leaves its parameters and optimizer state untouched at the same step, "
                            "a moment ahead"
                          : "The trainer leaves its parameters and optimizer state untouched at the next step");
  }
  log_geometry("skip", skip_rect_);
  separator();
  if (ImGui::Button("Dump checkpoint...")) {
    log_click("Dump checkpoint");
    open_dump_popup_ = true;
  }
  log_geometry("dump", dump_rect_);
  separator();
  draw_rewind_button(run);
  separator();
  ImGui::TextDisabled("policies:");
  for (const char* name : wire::kPolicyNames) {
    ImGui::SameLine();
    const std::string control = std::string("policy ") + name;
    const CommandStatus* last = state_.latest(control);
    const bool pending = last != nullptr && last->state == CommandState::kPending;
    const PolicyState known = state_.policy(name);
    const bool unknown = !pending && known == PolicyState::kUnknown;
    bool enabled = pending ? last->command.enable : known == PolicyState::kOn;
    if (unknown) ImGui::PushItemFlag(ImGuiItemFlags_MixedValue, true);
    const bool clicked = ImGui::Checkbox(name, &enabled);
    if (unknown) ImGui::PopItemFlag();
    if (ImGui::IsItemHovered()) {
      ImGui::SetTooltip("%s: %s%s", name, pending ? "pending" : policy_state_name(known),
                        unknown ? " (this probe does not report it until it changes; set it to know)" : "");
    }
    if (clicked && run != nullptr) {
      log_click(control + (enabled ? " on" : " off"));
      keel::wire::Command policy;
      policy.kind = wire::command_kind::kPolicy;
      policy.policy = name;
      policy.enable = enabled;
      send(control, policy, links, *run);
    }
  }
  ImGui::EndDisabled();
  draw_status();
  if (run != nullptr) draw_dump_popup(links, *run);
  if (run != nullptr) draw_rewind_popup(model, links, *run);
}

void ControlPanel::draw_status() {
  // What became of the command sent last, after every control, so that an acknowledgement
  // appearing never moves a button the next click aims at.
  const CommandStatus* status = last_control_.empty() ? nullptr : state_.latest(last_control_);
  if (status == nullptr) return;
  separator();
  if (status->state == CommandState::kAcknowledged && status->command.kind == wire::command_kind::kDump && !status->ack.path.empty()) {
    copy_button("copy path", status->ack.path);
    log_geometry("copy", copy_rect_);
    ImGui::SameLine();
  }
  const std::string text = status_text(*status);
  std::string line = text.rfind(status->command.kind, 0) == 0 ? text : last_control_ + ": " + text;
  // The other ranks of a skip sent to every rank: only a rank that did not take it is named.
  if (last_control_ == "skip" || last_control_ == "rewind") {
    for (const auto& [rank, control] : other_ranks_) {
      const CommandStatus* other = state_.latest(control);
      if (other == nullptr || other->state == CommandState::kAcknowledged) continue;
      line += "; rank " + std::to_string(rank) + ": " + status_text(*other);
    }
  }
  // One line, its height fixed: a text too long for the row loses its middle here, and reads
  // whole in the tooltip and in the events pane.
  const std::string shown = elide_middle(line, ImGui::GetContentRegionAvail().x, text_width, ellipsis());
  ImGui::TextColored(status_colour(status->state), "%s", shown.c_str());
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", line.c_str());
}

void ControlPanel::draw_dump_popup(const std::vector<EndpointState>& links, const RunModel& run) {
  bool focus_label = false;
  if (!begin_confirmation("Dump checkpoint?", open_dump_popup_, focus_label)) return;
  ImGui::TextUnformatted("Write the model and optimizer state and the recent telemetry now,");
  ImGui::TextUnformatted("into the trainer's dump directory. Training goes on.");
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 20);
  if (focus_label) ImGui::SetKeyboardFocusHere();
  const bool entered = ImGui::InputTextWithHint("##label", "label (optional)", dump_label_.data(),
                                                dump_label_.size(), ImGuiInputTextFlags_EnterReturnsTrue);
  if (ImGui::Button("Dump") || entered) {
    const std::string label = dump_label_.data();
    log_click("Dump (label \"" + label + "\")");
    keel::wire::Command dump;
    dump.kind = wire::command_kind::kDump;
    dump.label = label;
    send("dump", dump, links, run);
    dump_label_.fill('\0');
    ImGui::CloseCurrentPopup();
  }
  ImGui::SameLine();
  if (ImGui::Button("Cancel") || key_pressed(ImGuiKey_Escape, false)) {
    log_click("Cancel (no dump)");
    ImGui::CloseCurrentPopup();
  }
  ImGui::EndPopup();
}

void ControlPanel::draw_rewind_button(const RunModel* run) {
  // A probe that keeps no snapshots refuses every rewind: say so before the click.
  const uint64_t snapshot_bytes = run != nullptr ? run->latest_step().snapshot_bytes : 0;
  ImGui::BeginDisabled(snapshot_bytes == 0);
  if (ImGui::Button("Rewind...")) {
    log_click("Rewind");
    open_rewind_popup_ = true;
    rewind_error_.clear();
  }
  ImGui::EndDisabled();
  if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled)) {
    if (snapshot_bytes == 0) {
      ImGui::SetTooltip("The run keeps no snapshots to rewind to: the probe takes them with rewind_every\n"
                        "(keel-demo --rewind-every N; docs/rewind.md)");
    } else {
      ImGui::SetTooltip("Put back the training state of an earlier step from a snapshot in memory (%.1f MB held);\n"
                        "training goes on from there with new batches",
                        static_cast<double>(snapshot_bytes) / 1e6);
    }
  }
  log_geometry("rewind", rewind_rect_);
}

void ControlPanel::draw_rewind_popup(const Model& model, const std::vector<EndpointState>& links,
                                     const RunModel& run) {
  bool focus_step = false;
  if (!begin_confirmation("Rewind?", open_rewind_popup_, focus_step)) return;
  ImGui::AlignTextToFramePadding();
  ImGui::TextUnformatted("Rewind to the newest snapshot at or before step");
  ImGui::SameLine();
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 7);
  if (focus_step) ImGui::SetKeyboardFocusHere();
  const bool entered = ImGui::InputTextWithHint("##rewind step", "newest", rewind_step_.data(), rewind_step_.size(),
                                                ImGuiInputTextFlags_CharsDecimal | ImGuiInputTextFlags_EnterReturnsTrue);
  ImGui::SameLine();
  ImGui::TextUnformatted("?");
  ImGui::TextDisabled("The next step's update is skipped and the snapshot's weights, buffers and optimizer state");
  ImGui::TextDisabled("are put back; the steps after it stay on the charts, greyed.");
  if (!rewind_error_.empty()) ImGui::TextColored(status_colour(CommandState::kRefused), "%s", rewind_error_.c_str());
  const bool confirmed = ImGui::Button("Rewind");
  log_geometry("confirm-rewind", confirm_rect_);
  if (confirmed || entered) {
    const std::optional<int64_t> to_step = rewind_target(rewind_step_.data());
    if (to_step) {
      log_click("Rewind (to step " + std::to_string(*to_step) + ")");
      keel::wire::Command rewind;
      rewind.kind = wire::command_kind::kRewind;
      rewind.to_step = *to_step;
      send_every_rank("rewind", rewind, model, links, run);
      rewind_step_.fill('\0');
      rewind_error_.clear();
      ImGui::CloseCurrentPopup();
    } else {
      rewind_error_ = std::string("not a step: \"") + rewind_step_.data() + "\" (empty for the newest snapshot)";
    }
  }
  ImGui::SameLine();
  if (ImGui::Button("Cancel") || key_pressed(ImGuiKey_Escape, false)) {
    log_click("Cancel (no rewind)");
    ImGui::CloseCurrentPopup();
  }
  ImGui::EndPopup();
}

void ControlPanel::send(const std::string& control, keel::wire::Command command,
                        const std::vector<EndpointState>& links, const RunModel& run) {
  const std::optional<CommandTarget> target = target_for_rank(links, run.rank());
  if (!target) return;
  last_control_ = control;
  command.rank = target->rank;
  post(control, command, target->endpoint);
}

void ControlPanel::send_every_rank(const std::string& control, keel::wire::Command command, const Model& model,
                                   const std::vector<EndpointState>& links, const RunModel& run) {
  const std::vector<CommandTarget> ranks = every_rank(links);
  other_ranks_.clear();
  last_control_ = control;
  if (ranks.size() < 2) {
    send(control, command, links, run);
    return;
  }
  // One step for every rank: a data-parallel job's replicas must skip (or rewind at) the same one.
  command.at_step = synchronized_skip_step(model);
  for (const CommandTarget& target : ranks) {
    command.rank = target.rank;
    const std::string named = target.rank == run.rank() ? control : control + " rank " + std::to_string(target.rank);
    if (target.rank != run.rank()) other_ranks_.emplace_back(target.rank, named);
    post(named, command, target.endpoint);
  }
}

void ControlPanel::post(const std::string& control, keel::wire::Command command, const std::string& endpoint) {
  intents_.push_back(CommandIntent{control, endpoint, std::move(command)});
}

void ControlPanel::read_outcomes(const FrameInput& input) {
  for (const SentCommand& sent : input.sent) state_.submitted(sent.control, sent.id, sent.command);
  for (const CommandStatus& status : input.command_updates) state_.update(status);
}

}  // namespace keel::app::ui
