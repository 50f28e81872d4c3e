#include "ui/open_dialog.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <system_error>
#include <utility>

#include <imgui.h>

#include "ui/key_presses.hpp"
#include "ui/verbose_log.hpp"

namespace keel::app::ui {
namespace {

constexpr const char* kDialogName = "Open a run kept on disk";

std::string rect_text(const ImVec2& min, const ImVec2& max) {
  char text[96];
  std::snprintf(text, sizeof text, "x0 %.0f y0 %.0f x1 %.0f y1 %.0f", min.x, min.y, max.x, max.y);
  return text;
}

std::string size_text(uintmax_t bytes) {
  char text[32];
  if (bytes >= 1'000'000'000) {
    std::snprintf(text, sizeof text, "%.1f GB", double(bytes) / 1e9);
  } else if (bytes >= 1'000'000) {
    std::snprintf(text, sizeof text, "%.1f MB", double(bytes) / 1e6);
  } else {
    std::snprintf(text, sizeof text, "%.0f kB", double(bytes) / 1e3);
  }
  return text;
}

// "5 min ago": which run is last night's is read from the age, not a timestamp.
std::string age_text(std::filesystem::file_time_type modified) {
  const auto age = std::filesystem::file_time_type::clock::now() - modified;
  const long long secs = std::chrono::duration_cast<std::chrono::seconds>(age).count();
  char text[32];
  if (secs < 60) {
    std::snprintf(text, sizeof text, "just now");
  } else if (secs < 3600) {
    std::snprintf(text, sizeof text, "%lld min ago", secs / 60);
  } else if (secs < 48 * 3600) {
    std::snprintf(text, sizeof text, "%lld h ago", secs / 3600);
  } else {
    std::snprintf(text, sizeof text, "%lld days ago", secs / 86400);
  }
  return text;
}

}  // namespace

void OpenDialog::draw_button() {
  if (ImGui::Button("Open...")) open();
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("open a recording or a dump's telemetry (Ctrl+O; or drop a file on the window)");
  const std::string rect = rect_text(ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
  if (rect != logged_button_) {
    logged_button_ = rect;
    verbose_log("keel: control open %s", rect.c_str());
  }
}

void OpenDialog::open() { open_requested_ = true; }

std::vector<std::string> OpenDialog::take_requests() { return std::exchange(requests_, {}); }

void OpenDialog::choose(const std::string& path) {
  requests_.push_back(path);
  ImGui::CloseCurrentPopup();
}

void OpenDialog::draw_dialog() {
  if (std::exchange(open_requested_, false) && !ImGui::IsPopupOpen(kDialogName)) {
    std::error_code error;
    const std::filesystem::path here = std::filesystem::current_path(error);
    folder_ = error ? std::string(".") : here.string();
    files_ = find_recording_files(error ? std::filesystem::path(".") : here);
    logged_entries_.assign(files_.size(), std::string());
    focus_path_ = true;
    ImGui::OpenPopup(kDialogName);
    verbose_log("keel: open dialog lists %zu files in %s", files_.size(), folder_.c_str());
  }
  const ImGuiViewport* viewport = ImGui::GetMainViewport();
  ImGui::SetNextWindowPos(ImVec2(viewport->WorkPos.x + viewport->WorkSize.x * 0.5f, viewport->WorkPos.y + viewport->WorkSize.y * 0.4f),
                          ImGuiCond_Always, ImVec2(0.5f, 0.5f));
  ImGui::SetNextWindowSize(ImVec2(viewport->WorkSize.x * 0.6f, 0), ImGuiCond_Always);
  shown_ = ImGui::BeginPopupModal(kDialogName, nullptr, ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoSavedSettings);
  if (!shown_) return;
  if (key_pressed(ImGuiKey_Escape, false)) {
    ImGui::CloseCurrentPopup();
    ImGui::EndPopup();
    return;
  }
  ImGui::TextUnformatted("A recording (keel-runs/*.keelrec) or a dump's telemetry.msgpack:");
  const float open_w = ImGui::CalcTextSize("Open").x + ImGui::GetStyle().FramePadding.x * 2;
  ImGui::SetNextItemWidth(-(open_w + ImGui::GetStyle().ItemSpacing.x));
  if (std::exchange(focus_path_, false)) ImGui::SetKeyboardFocusHere();
  const bool entered = ImGui::InputTextWithHint("##path", "path to a file", path_.data(), path_.size(),
                                                ImGuiInputTextFlags_EnterReturnsTrue);
  ImGui::SameLine();
  const bool clicked = ImGui::Button("Open");
  if ((entered || clicked) && path_[0] != '\0') {
    choose(path_.data());
  } else if (entered) {
    ImGui::SetKeyboardFocusHere(-1);   // Enter on an empty field: keep typing there
  }
  ImGui::Spacing();
  draw_files();
  ImGui::Spacing();
  if (ImGui::Button("Cancel")) ImGui::CloseCurrentPopup();
  ImGui::EndPopup();
}

void OpenDialog::draw_files() {
  if (files_.empty()) {
    ImGui::TextDisabled("No recordings in keel-runs/ nor dumps in keel-dumps/ under %s.", folder_.c_str());
    return;
  }
  ImGui::TextDisabled("In %s, newest first:", folder_.c_str());
  const float rows_h = ImGui::GetTextLineHeightWithSpacing() * float(std::min<size_t>(files_.size(), 12) + 1);
  const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY | ImGuiTableFlags_BordersInnerV;
  if (!ImGui::BeginTable("files", 3, flags, ImVec2(0, rows_h))) return;
  ImGui::TableSetupScrollFreeze(0, 1);
  ImGui::TableSetupColumn("file", ImGuiTableColumnFlags_WidthStretch);
  ImGui::TableSetupColumn("size", ImGuiTableColumnFlags_WidthFixed);
  ImGui::TableSetupColumn("written", ImGuiTableColumnFlags_WidthFixed);
  ImGui::TableHeadersRow();
  for (size_t i = 0; i < files_.size(); ++i) {
    const ListedFile& file = files_[i];
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::PushID(int(i));
    const bool picked = ImGui::Selectable(file.path.c_str(), false, ImGuiSelectableFlags_SpanAllColumns);
    ImGui::PopID();
    const std::string rect = rect_text(ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    if (rect != logged_entries_[i]) {
      logged_entries_[i] = rect;
      verbose_log("keel: open dialog entry %zu %s %s", i, file.path.c_str(), rect.c_str());
    }
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(size_text(file.size_bytes).c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(age_text(file.modified).c_str());
    if (picked) choose(file.path);
  }
  ImGui::EndTable();
}

}  // namespace keel::app::ui
