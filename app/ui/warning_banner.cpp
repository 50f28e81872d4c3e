#include "ui/warning_banner.hpp"

#include <imgui.h>

#include "ui/run_picker.hpp"
#include "ui/verbose_log.hpp"
#include "values/warning_numbers.hpp"

namespace keel::app::ui {
namespace {

// Amber, the warning's colour (plot.hpp's kWarningStepColour marks its step): dark behind the
// text, bright for the headline.
constexpr ImU32 kBannerColour = IM_COL32(110, 72, 8, 255);
const ImVec4 kHeadlineColour(1.0f, 0.75f, 0.16f, 1.0f);
const ImVec4 kTextColour(1.0f, 0.93f, 0.80f, 1.0f);

// Logs "keel: WHAT x0 .. y0 .. x1 .. y1 .." for the last item when it first shows or moves.
void log_rect(const char* what, std::array<float, 4>& logged) {
  const ImVec2 min = ImGui::GetItemRectMin(), max = ImGui::GetItemRectMax();
  const std::array<float, 4> rect{min.x, min.y, max.x, max.y};
  if (rect == logged) return;
  logged = rect;
  verbose_log("keel: %s x0 %.0f y0 %.0f x1 %.0f y1 %.0f", what, min.x, min.y, max.x, max.y);
}

}  // namespace

std::vector<std::string> warning_banner_lines(const wire::Event& warning, const RunModel& of, const RunModel* shown) {
  std::string headline = "Warning at step " + std::to_string(warning.step) + ": ";
  if (warning.warning) {
    headline += warning.warning->signal + (warning.layer.empty() ? " of the run" : " of " + warning.layer);
  } else {
    headline += warning.layer.empty() ? std::string("a trend that usually ends in a divergence") : warning.layer;
  }
  // A forecast on a rank the panes do not show is as urgent: say whose it is.
  if (&of != shown) headline += ", " + run_label(of);
  std::vector<std::string> lines{headline};
  if (!warning.warning) {
    if (!warning.detail.empty()) lines.push_back(warning.detail);
    return lines;
  }
  const wire::Warning& map = *warning.warning;
  lines.push_back(warning_level_text(map) + ", " + warning_trend_text(map) + "; " + warning_lead_text(map));
  if (!map.advice.empty()) lines.push_back("Advice: " + map.advice);
  return lines;
}

void WarningBanner::log_shown(const Identity& identity, const wire::Event& warning,
                              const std::vector<std::string>& lines) {
  if (logged_ && *logged_ == identity) return;
  logged_ = identity;
  if (!verbose_log_on()) return;
  std::string text;
  for (const std::string& line : lines) text += (text.empty() ? "" : " | ") + line;
  verbose_log("keel: warning banner step %lld: %s", static_cast<long long>(warning.step), text.c_str());
}

void WarningBanner::draw(const Model& model, const RunModel* shown) {
  const std::optional<NewestWarning> newest = newest_warning(model);
  if (!newest) return;
  const wire::Event& warning = *newest->event;
  const Identity identity{newest->run->key(), warning.seq, warning.stamp_unix_ns};
  if (dismissed_ && *dismissed_ == identity) return;
  const std::vector<std::string> lines = warning_banner_lines(warning, *newest->run, shown);
  log_shown(identity, warning, lines);

  const ImGuiStyle& style = ImGui::GetStyle();
  const float height = ImGui::GetTextLineHeightWithSpacing() * float(lines.size()) - style.ItemSpacing.y +
                       2 * style.WindowPadding.y;
  ImGui::PushStyleColor(ImGuiCol_ChildBg, kBannerColour);
  ImGui::BeginChild("warning_banner", ImVec2(0, height), false,
                    ImGuiWindowFlags_AlwaysUseWindowPadding | ImGuiWindowFlags_NoScrollbar |
                        ImGuiWindowFlags_NoScrollWithMouse);
  ImGui::PushStyleColor(ImGuiCol_Text, kHeadlineColour);
  ImGui::TextUnformatted(lines[0].c_str());
  ImGui::PopStyleColor();
  // The probe's own sentence, whole, where the lines are cut by the window's width.
  if (ImGui::IsItemHovered() && !warning.detail.empty()) ImGui::SetTooltip("%s", warning.detail.c_str());
  const float button_w = ImGui::CalcTextSize("Dismiss").x + 2 * style.FramePadding.x;
  ImGui::SameLine(ImGui::GetWindowContentRegionMax().x - button_w);
  if (ImGui::SmallButton("Dismiss")) {
    dismissed_ = identity;
    verbose_log("keel: clicked Dismiss warning (step %lld)", static_cast<long long>(warning.step));
  }
  log_rect("control dismiss-warning", logged_button_);
  ImGui::PushStyleColor(ImGuiCol_Text, kTextColour);
  for (size_t i = 1; i < lines.size(); ++i) ImGui::TextUnformatted(lines[i].c_str());
  ImGui::PopStyleColor();
  ImGui::EndChild();
  ImGui::PopStyleColor();
  log_rect("warning banner", logged_rect_);
}

}  // namespace keel::app::ui
