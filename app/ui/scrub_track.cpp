#include "ui/scrub_track.hpp"

#include <algorithm>
#include <cmath>

namespace keel::app::ui {

ScrubTrack::ScrubTrack(float x0_px, float x1_px, StepRange run, double min_span_steps)
    : x0_px_(x0_px), x1_px_(std::max(x1_px, x0_px + 1.0f)), min_span_steps_(std::max(0.0, min_span_steps)) {
  extent_.first = run.first;
  extent_.last = std::max(run.last, run.first + min_span_steps_);
}

double ScrubTrack::steps_per_px() const { return extent_.span() / double(x1_px_ - x0_px_); }

float ScrubTrack::px_of(double step) const {
  return x0_px_ + float((step - extent_.first) / extent_.span() * double(x1_px_ - x0_px_));
}

double ScrubTrack::step_at(float px) const {
  return extent_.first + double(px - x0_px_) * steps_per_px();
}

BoxPx ScrubTrack::box_px(StepRange view) const {
  float x0 = std::clamp(px_of(view.first), x0_px_, x1_px_);
  float x1 = std::clamp(px_of(view.last), x0_px_, x1_px_);
  const float track_px = x1_px_ - x0_px_;
  const float min_px = std::min(kMinBoxPx, track_px);
  if (x1 - x0 < min_px) {
    // Widened around the view's centre, then pushed back inside the track at either end.
    const float centre = (x0 + x1) * 0.5f;
    x0 = std::clamp(centre - min_px * 0.5f, x0_px_, x1_px_ - min_px);
    x1 = x0 + min_px;
  }
  return {x0, x1};
}

ScrubPart ScrubTrack::part_at(float px, StepRange view) const {
  const BoxPx box = box_px(view);
  // Inside the box an edge takes at most a quarter of it, so a narrow box still has a middle
  // to pan by; a box narrower than its grab zones is panned from inside and resized from just
  // outside.
  const float inside = std::min(kEdgeGrabPx, (box.x1 - box.x0) * 0.25f);
  const bool near_left = px >= box.x0 - kEdgeGrabPx && px <= box.x0 + inside;
  const bool near_right = px >= box.x1 - inside && px <= box.x1 + kEdgeGrabPx;
  if (near_left && near_right) {
    return std::abs(px - box.x0) <= std::abs(px - box.x1) ? ScrubPart::kLeftEdge : ScrubPart::kRightEdge;
  }
  if (near_left) return ScrubPart::kLeftEdge;
  if (near_right) return ScrubPart::kRightEdge;
  if (px > box.x0 && px < box.x1) return ScrubPart::kBox;
  return ScrubPart::kOutside;
}

StepRange ScrubTrack::within_run(StepRange view) const {
  const double span = std::min(std::max(view.span(), min_span_steps_), extent_.span());
  const double first = std::clamp(view.first, extent_.first, extent_.last - span);
  return {first, first + span};
}

StepRange ScrubTrack::drag(ScrubPart part, StepRange at_press, float press_px, float px) const {
  const double moved = double(px - press_px) * steps_per_px();
  switch (part) {
    case ScrubPart::kBox:
      return within_run({at_press.first + moved, at_press.last + moved});
    case ScrubPart::kLeftEdge: {
      // Past the other edge it stops at the minimum span: zoomed in as far as a view goes.
      const double last = std::min(at_press.last, extent_.last);
      const double first = std::max(extent_.first, std::min(at_press.first + moved, last - min_span_steps_));
      return within_run({first, last});
    }
    case ScrubPart::kRightEdge: {
      const double first = std::max(at_press.first, extent_.first);
      const double last = std::min(extent_.last, std::max(at_press.last + moved, first + min_span_steps_));
      return within_run({first, last});
    }
    case ScrubPart::kOutside:
      break;
  }
  return at_press;
}

StepRange ScrubTrack::centred_at(float px, StepRange view) const {
  const double centre = step_at(px);
  const double half = view.span() * 0.5;
  return within_run({centre - half, centre + half});
}

}  // namespace keel::app::ui
