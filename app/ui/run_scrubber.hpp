// keel app RunScrubber: a thin strip under the global charts holding the shown run's whole
// step extent, with the view every step plot shows drawn on it as a box.
//
// What it is for: a run opened from disk (or watched for hours) is far longer than the view;
// the charts' wheel and drag only move from where the view is. The strip shows where the view
// lies in the whole run, and where the run went wrong: its loss as a faint line, non-finite
// steps as red bands, skipped updates as orange ticks and the marked step (the first
// non-finite) in its own colour. Dragging the box pans, dragging one of its edges zooms (down
// to AppState::kMinSpanSteps), a press beside it centres the view there, the wheel zooms
// around the view's centre, and a double click or the "whole run" button beside it shows the
// whole run. The arithmetic is ScrubTrack's (scrub_track.hpp); this file draws and reads the
// mouse. With --verbose it logs its geometry ("keel: scrubber x0 .. y0 .. x1 .. y1 ..", and
// its button's as "keel: control whole_run ...", when they show or move) and the view each
// drag, click or the button left ("keel: scrubber view FIRST to LAST"), so a test, or a user
// with xdotool, can drag it.
// Threads: the UI thread, inside an ImGui window.
// Never: changes the model; it changes the view only through AppState.
#pragma once

#include <string>

#include <imgui.h>

#include "model/run_model.hpp"
#include "ui/app_state.hpp"
#include "ui/scrub_track.hpp"

namespace keel::app::ui {

class RunScrubber {
 public:
  // Draws the strip and its button, `width` pixels in all, at the cursor (one line high).
  void draw(const RunModel& run, AppState& state, float width);
  // Its height: the line draw() takes.
  static float height();

 private:
  void draw_strip(const RunModel& run, const AppState& state, const ScrubTrack& track, const ImVec2& min,
                  const ImVec2& max) const;
  void show(AppState& state, StepRange view);

  ScrubPart dragging_ = ScrubPart::kOutside;   // the part pressed, while the button is held
  StepRange at_press_;
  float press_px_ = 0;
  std::string logged_strip_;    // the geometry lines as last printed
  std::string logged_button_;
};

}  // namespace keel::app::ui
