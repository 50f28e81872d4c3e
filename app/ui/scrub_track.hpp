// keel app ScrubTrack: the run scrubber's arithmetic, steps <-> pixels and what a drag does.
//
// What it is for: the scrubber (run_scrubber.hpp) is a strip whose width holds the whole run;
// a box on it is the view every step plot shows. This class says where the box is drawn,
// which part of it a pointer is on, and which view a press, a drag or a double click asks
// for, as plain numbers, so the behaviour a user relies on is tested without a window.
// Drags are relative to where the press began (the box follows the pointer, it never jumps
// to it), and every view it returns lies within the run and is at least the minimum span wide.
// Threads: a plain value; any one thread.
// Never: touches ImGui or AppState, throws, or allocates.
#pragma once

#include <cstdint>

namespace keel::app::ui {

// A range of steps [first, last] (fractional: views are continuous, as AppState's are).
struct StepRange {
  double first = 0;
  double last = 0;
  double span() const { return last - first; }
};

// The part of the scrubber under the pointer.
enum class ScrubPart {
  kOutside,    // the track beside the box: a press centres the view there
  kBox,        // inside the box: a drag pans
  kLeftEdge,   // a drag moves the view's first step (zooms, the last step stays)
  kRightEdge,  // a drag moves the view's last step
};

// The box's pixels on the track.
struct BoxPx {
  float x0 = 0;
  float x1 = 0;
};

class ScrubTrack {
 public:
  // A view of a few steps in a run of a million is far under a pixel: the box is drawn at
  // least this wide (around the view's centre) so it is seen and can be grabbed.
  static constexpr float kMinBoxPx = 7.0f;
  // How far from an edge (outside the box, and inside it while the box is wide enough to
  // keep a middle) a press still takes the edge.
  static constexpr float kEdgeGrabPx = 4.0f;

  // Pixels [x0_px, x1_px] hold the run's steps [run.first, run.last]; a run shorter than
  // `min_span_steps` is given that many (a view is never narrower: AppState::kMinSpanSteps).
  ScrubTrack(float x0_px, float x1_px, StepRange run, double min_span_steps);

  float px_of(double step) const;
  double step_at(float px) const;
  // What the track spans: the run, widened to the minimum span when shorter.
  StepRange extent() const { return extent_; }

  // Where `view` is drawn: within the track, and at least kMinBoxPx wide.
  BoxPx box_px(StepRange view) const;
  // Which part of the track the pointer at `px` is on, `view` shown. Where a narrow box puts
  // both edges in reach, the nearer wins; inside a box too narrow for a middle, a press pans.
  ScrubPart part_at(float px, StepRange view) const;

  // The view after dragging `part` from `press_px` to `px`, `at_press` being the view when
  // the press began. kOutside returns `at_press` (the press itself centred the view).
  StepRange drag(ScrubPart part, StepRange at_press, float press_px, float px) const;
  // `view` moved so that the step at `px` is its centre (its span kept, within the run).
  StepRange centred_at(float px, StepRange view) const;
  // The whole run (a double click, the "whole run" button).
  StepRange whole_run() const { return extent_; }

 private:
  // `view` shifted (never resized, unless wider than the run) to lie within the run.
  StepRange within_run(StepRange view) const;
  double steps_per_px() const;

  float x0_px_;
  float x1_px_;
  StepRange extent_;
  double min_span_steps_;
};

}  // namespace keel::app::ui
