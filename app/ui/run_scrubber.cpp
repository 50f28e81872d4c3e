#include "ui/run_scrubber.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>
#include <vector>

#include "model/column_grid.hpp"
#include "ui/colormap.hpp"
#include "ui/plot.hpp"
#include "ui/verbose_log.hpp"

namespace keel::app::ui {
namespace {

constexpr ImU32 kTrackColour = IM_COL32(22, 22, 28, 255);
constexpr ImU32 kTrackBorder = IM_COL32(110, 110, 120, 255);
// Faint: the line says where the run is calm or not; the charts above are for reading values.
constexpr ImU32 kLossColour = IM_COL32(90, 170, 255, 110);
constexpr ImU32 kBoxFill = IM_COL32(255, 255, 255, 40);
constexpr ImU32 kBoxBorder = IM_COL32(255, 255, 255, 170);
constexpr ImU32 kBoxBorderActive = IM_COL32(255, 255, 255, 255);
constexpr const char* kWholeRunLabel = "whole run";

ImU32 with_alpha(ImU32 colour, uint32_t alpha) { return (colour & 0x00FFFFFFu) | (alpha << 24); }

// Prints where `what` is ("keel: scrubber x0 8 y0 300 x1 990 y1 319", window pixels) when it
// first shows or moves.
void log_rect(const char* what, const ImVec2& min, const ImVec2& max, std::string& logged) {
  char text[160];
  std::snprintf(text, sizeof text, "keel: %s x0 %.0f y0 %.0f x1 %.0f y1 %.0f", what, min.x, min.y, max.x, max.y);
  if (logged == text) return;
  logged = text;
  verbose_log("%s", text);
}

}  // namespace

float RunScrubber::height() { return ImGui::GetFrameHeight(); }

void RunScrubber::draw(const RunModel& run, AppState& state, float width) {
  const ImGuiStyle& style = ImGui::GetStyle();
  const float button_w = ImGui::CalcTextSize(kWholeRunLabel).x + style.FramePadding.x * 2;
  const ImVec2 min = ImGui::GetCursorScreenPos();
  const ImVec2 size(std::max(1.0f, width - button_w - style.ItemSpacing.x), height());
  const ImVec2 max(min.x + size.x, min.y + size.y);
  ImGui::InvisibleButton("##scrubber", size);
  const bool hovered = ImGui::IsItemHovered();
  const bool active = ImGui::IsItemActive();

  const ScrubTrack track(min.x, max.x,
                         {run.has_steps() ? double(run.first_step()) : 0.0, run.has_steps() ? double(run.last_step()) : 0.0},
                         AppState::kMinSpanSteps);
  const StepRange view{state.view_first(), state.view_last()};
  const float mouse_x = ImGui::GetIO().MousePos.x;
  if (ImGui::IsItemActivated()) {
    if (ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left)) {
      show(state, track.whole_run());
      dragging_ = ScrubPart::kOutside;
    } else {
      dragging_ = track.part_at(mouse_x, view);
      at_press_ = view;
      if (dragging_ == ScrubPart::kOutside) {
        // The view jumps to the press; holding on, the user drags it from there.
        at_press_ = track.centred_at(mouse_x, view);
        show(state, at_press_);
        dragging_ = ScrubPart::kBox;
      }
      press_px_ = mouse_x;
    }
  } else if (active && dragging_ != ScrubPart::kOutside && ImGui::GetIO().MouseDelta.x != 0.0f) {
    show(state, track.drag(dragging_, at_press_, press_px_, mouse_x));
  }
  if (ImGui::IsItemDeactivated()) {
    dragging_ = ScrubPart::kOutside;
    verbose_log("keel: scrubber view %.0f to %.0f", state.view_first(), state.view_last());
  }
  if (hovered && ImGui::GetIO().MouseWheel != 0.0f) {
    // Around the view's centre: the box grows or shrinks in place rather than sliding away
    // towards the pointer.
    state.zoom(std::pow(0.85, double(ImGui::GetIO().MouseWheel)), (state.view_first() + state.view_last()) * 0.5);
  }

  const ScrubPart under = active ? dragging_ : hovered ? track.part_at(mouse_x, view) : ScrubPart::kOutside;
  if (under == ScrubPart::kLeftEdge || under == ScrubPart::kRightEdge) {
    ImGui::SetMouseCursor(ImGuiMouseCursor_ResizeEW);
  } else if (under == ScrubPart::kBox) {
    ImGui::SetMouseCursor(ImGuiMouseCursor_Hand);
  }
  draw_strip(run, state, track, min, max);
  if (hovered && !active) {
    ImGui::BeginTooltip();
    ImGui::Text("step %lld of %lld to %lld", static_cast<long long>(std::llround(track.step_at(mouse_x))),
                static_cast<long long>(run.first_step()), static_cast<long long>(run.last_step()));
    ImGui::TextDisabled("drag the box to pan, its edges to zoom; click to go there; double-click: whole run");
    ImGui::EndTooltip();
  }
  log_rect("scrubber", min, max, logged_strip_);

  ImGui::SameLine();
  if (ImGui::Button(kWholeRunLabel)) {
    show(state, track.whole_run());
    verbose_log("keel: scrubber view %.0f to %.0f", state.view_first(), state.view_last());
  }
  log_rect("control whole_run", ImGui::GetItemRectMin(), ImGui::GetItemRectMax(), logged_button_);
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("show steps %lld to %lld in every plot", static_cast<long long>(run.first_step()),
                                                static_cast<long long>(run.last_step()));
}

void RunScrubber::show(AppState& state, StepRange view) { state.show_steps(view.first, view.last); }

void RunScrubber::draw_strip(const RunModel& run, const AppState& state, const ScrubTrack& track, const ImVec2& min,
                             const ImVec2& max) const {
  ImDrawList* draw = ImGui::GetWindowDrawList();
  draw->AddRectFilled(min, max, kTrackColour);
  if (run.has_steps()) {
    // One column a pixel over the whole run, from the model's coarse levels: as cheap as a chart.
    PlotFrame frame;
    frame.min = ImVec2(min.x, min.y + 2.0f);
    frame.max = ImVec2(max.x, max.y - 2.0f);
    frame.x_first = double(run.first_step());
    frame.x_last = double(run.last_step()) + 1;
    const ColumnGrid grid(run.first_step(), run.last_step(), frame_columns(frame));
    std::vector<Summary> loss(size_t(grid.columns()));
    run.global_series(GlobalSeries::kLoss).summarize(grid, loss.data());
    fit_y(frame, {&loss});
    std::vector<Summary> flags(size_t(grid.columns()));
    run.global_series(GlobalSeries::kSkipped).summarize(grid, flags.data());
    draw_flag_columns(draw, frame, flags, with_alpha(kSkippedColour, 0xC0));
    // A non-finite gradient with a finite loss is the usual start of a blow-up: the grad
    // norm's non-finite columns are marked as the loss's are (draw_series) on the strip.
    run.global_series(GlobalSeries::kGradNorm).summarize(grid, flags.data());
    const float column_px = (max.x - min.x) / float(flags.size());
    for (size_t i = 0; i < flags.size(); ++i) {
      if (!flags[i].has_nonfinite()) continue;
      const float x = min.x + (float(i) + 0.5f) * column_px;
      draw->AddRectFilled(ImVec2(x - std::max(1.0f, column_px * 0.5f), min.y),
                          ImVec2(x + std::max(1.0f, column_px * 0.5f), max.y), with_alpha(kNonfiniteColour, 0xB0));
    }
    draw_series(draw, frame, loss, kLossColour);
  }
  // The newest warning's step, then the first non-finite's over it where they are one.
  for (const auto& [step, colour] : {std::pair{state.warning_step(), kWarningStepColour},
                                     std::pair{state.marked_step(), kMarkedStepColour}}) {
    if (step < 0) continue;
    const float x = track.px_of(double(step));
    draw->AddLine(ImVec2(x, min.y), ImVec2(x, max.y), colour, 2.0f);
  }
  const BoxPx box = track.box_px({state.view_first(), state.view_last()});
  const bool active = ImGui::IsItemActive();
  draw->AddRectFilled(ImVec2(box.x0, min.y), ImVec2(box.x1, max.y), kBoxFill);
  draw->AddRect(ImVec2(box.x0, min.y), ImVec2(box.x1, max.y), active ? kBoxBorderActive : kBoxBorder, 0.0f, 0,
                active ? 2.0f : 1.5f);
  draw->AddRect(min, max, kTrackBorder);
}

}  // namespace keel::app::ui
