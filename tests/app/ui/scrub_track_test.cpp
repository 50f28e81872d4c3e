// ScrubTrack: the scrubber's box is where the view is, drags pan and zoom as promised, the view
// never leaves the run, and both a single step's zoom and a million-step run are reachable.
#include "ui/scrub_track.hpp"

#include <gtest/gtest.h>

#include "ui/app_state.hpp"

namespace keel::app::ui {
namespace {

// 1,000 pixels for steps 0..999: one step a pixel, easy to read.
ScrubTrack thousand_steps() { return ScrubTrack(100.0f, 1100.0f, {0, 1000}, AppState::kMinSpanSteps); }

TEST(ScrubTrack, MapsStepsToPixelsBothWays) {
  const ScrubTrack track = thousand_steps();
  EXPECT_FLOAT_EQ(track.px_of(0), 100.0f);
  EXPECT_FLOAT_EQ(track.px_of(1000), 1100.0f);
  EXPECT_FLOAT_EQ(track.px_of(250), 350.0f);
  EXPECT_DOUBLE_EQ(track.step_at(350.0f), 250.0);
  EXPECT_DOUBLE_EQ(track.step_at(track.px_of(777)), 777.0);
}

TEST(ScrubTrack, TheBoxIsTheViewAndStaysGrabbableWhenTheViewIsUnderAPixel) {
  const ScrubTrack track = thousand_steps();
  const BoxPx box = track.box_px({200, 400});
  EXPECT_FLOAT_EQ(box.x0, 300.0f);
  EXPECT_FLOAT_EQ(box.x1, 500.0f);
  // Eight steps of a million: a thousandth of a pixel, drawn kMinBoxPx wide around it.
  const ScrubTrack million(0.0f, 1000.0f, {0, 1'000'000}, AppState::kMinSpanSteps);
  const BoxPx tiny = million.box_px({500'000, 500'008});
  EXPECT_FLOAT_EQ(tiny.x1 - tiny.x0, ScrubTrack::kMinBoxPx);
  EXPECT_NEAR((tiny.x0 + tiny.x1) * 0.5f, 500.0f, 0.01f);
  // At the run's end it is pushed back inside the track, not centred past it.
  const BoxPx at_end = million.box_px({999'992, 1'000'000});
  EXPECT_FLOAT_EQ(at_end.x1, 1000.0f);
  EXPECT_FLOAT_EQ(at_end.x0, 1000.0f - ScrubTrack::kMinBoxPx);
}

TEST(ScrubTrack, SaysWhichPartThePointerIsOn) {
  const ScrubTrack track = thousand_steps();
  const StepRange view{200, 400};   // box 300..500
  EXPECT_EQ(track.part_at(200.0f, view), ScrubPart::kOutside);
  EXPECT_EQ(track.part_at(600.0f, view), ScrubPart::kOutside);
  EXPECT_EQ(track.part_at(400.0f, view), ScrubPart::kBox);
  EXPECT_EQ(track.part_at(298.0f, view), ScrubPart::kLeftEdge);   // just outside
  EXPECT_EQ(track.part_at(303.0f, view), ScrubPart::kLeftEdge);   // just inside
  EXPECT_EQ(track.part_at(497.0f, view), ScrubPart::kRightEdge);
  EXPECT_EQ(track.part_at(503.0f, view), ScrubPart::kRightEdge);
  EXPECT_EQ(track.part_at(306.0f, view), ScrubPart::kBox);
}

TEST(ScrubTrack, ANarrowBoxIsPannedFromItsMiddleAndResizedFromBeside) {
  const ScrubTrack million(0.0f, 1000.0f, {0, 1'000'000}, AppState::kMinSpanSteps);
  const StepRange view{500'000, 500'008};
  const BoxPx box = million.box_px(view);
  EXPECT_EQ(million.part_at((box.x0 + box.x1) * 0.5f, view), ScrubPart::kBox);
  EXPECT_EQ(million.part_at(box.x0 - 2.0f, view), ScrubPart::kLeftEdge);
  EXPECT_EQ(million.part_at(box.x1 + 2.0f, view), ScrubPart::kRightEdge);
}

TEST(ScrubTrack, DraggingTheBoxPansByThePointersMoveAndStopsAtTheRunsEnds) {
  const ScrubTrack track = thousand_steps();
  const StepRange at_press{200, 400};
  const StepRange moved = track.drag(ScrubPart::kBox, at_press, 400.0f, 450.0f);
  EXPECT_DOUBLE_EQ(moved.first, 250.0);
  EXPECT_DOUBLE_EQ(moved.last, 450.0);
  const StepRange past_end = track.drag(ScrubPart::kBox, at_press, 400.0f, 2000.0f);
  EXPECT_DOUBLE_EQ(past_end.first, 800.0);
  EXPECT_DOUBLE_EQ(past_end.last, 1000.0);
  const StepRange past_start = track.drag(ScrubPart::kBox, at_press, 400.0f, -500.0f);
  EXPECT_DOUBLE_EQ(past_start.first, 0.0);
  EXPECT_DOUBLE_EQ(past_start.last, 200.0);
}

TEST(ScrubTrack, DraggingAnEdgeZoomsWithTheOtherEdgeStill) {
  const ScrubTrack track = thousand_steps();
  const StepRange at_press{200, 400};
  const StepRange wider = track.drag(ScrubPart::kLeftEdge, at_press, 300.0f, 200.0f);
  EXPECT_DOUBLE_EQ(wider.first, 100.0);
  EXPECT_DOUBLE_EQ(wider.last, 400.0);
  const StepRange narrower = track.drag(ScrubPart::kRightEdge, at_press, 500.0f, 350.0f);
  EXPECT_DOUBLE_EQ(narrower.first, 200.0);
  EXPECT_DOUBLE_EQ(narrower.last, 250.0);
  // Neither edge goes past the run.
  EXPECT_DOUBLE_EQ(track.drag(ScrubPart::kLeftEdge, at_press, 300.0f, 0.0f).first, 0.0);
  EXPECT_DOUBLE_EQ(track.drag(ScrubPart::kRightEdge, at_press, 500.0f, 1500.0f).last, 1000.0);
}

TEST(ScrubTrack, AnEdgeDraggedOntoTheOtherZoomsToTheSmallestView) {
  // Single steps are reached from the whole of a million-step run in one drag: the edge
  // dragged past the other stops at AppState's minimum span.
  const ScrubTrack million(0.0f, 1000.0f, {0, 1'000'000}, AppState::kMinSpanSteps);
  const StepRange whole = million.whole_run();
  const StepRange right_in = million.drag(ScrubPart::kRightEdge, whole, 1000.0f, -50.0f);
  EXPECT_DOUBLE_EQ(right_in.first, 0.0);
  EXPECT_DOUBLE_EQ(right_in.last, AppState::kMinSpanSteps);
  const StepRange left_in = million.drag(ScrubPart::kLeftEdge, whole, 0.0f, 1050.0f);
  EXPECT_DOUBLE_EQ(left_in.last, 1'000'000.0);
  EXPECT_DOUBLE_EQ(left_in.span(), AppState::kMinSpanSteps);
}

TEST(ScrubTrack, APressBesideTheBoxCentresTheViewThereWithItsSpanKept) {
  const ScrubTrack track = thousand_steps();
  const StepRange centred = track.centred_at(800.0f, {200, 400});   // step 700
  EXPECT_DOUBLE_EQ(centred.first, 600.0);
  EXPECT_DOUBLE_EQ(centred.last, 800.0);
  const StepRange at_start = track.centred_at(110.0f, {200, 400});   // step 10: no room left of it
  EXPECT_DOUBLE_EQ(at_start.first, 0.0);
  EXPECT_DOUBLE_EQ(at_start.last, 200.0);
  // kOutside's drag is the press's own business: the view stays as the press left it.
  EXPECT_DOUBLE_EQ(track.drag(ScrubPart::kOutside, centred, 800.0f, 900.0f).first, 600.0);
}

TEST(ScrubTrack, TheWholeRunIsTheRunAndAShortRunIsGivenTheMinimumSpan) {
  const ScrubTrack track(0.0f, 500.0f, {1000, 1'001'000}, AppState::kMinSpanSteps);
  EXPECT_DOUBLE_EQ(track.whole_run().first, 1000.0);
  EXPECT_DOUBLE_EQ(track.whole_run().last, 1'001'000.0);
  const ScrubTrack three_steps(0.0f, 500.0f, {0, 3}, AppState::kMinSpanSteps);
  EXPECT_DOUBLE_EQ(three_steps.whole_run().span(), AppState::kMinSpanSteps);
  // A view wider than the run (the default 400 steps of a run of 3) is the whole track.
  const StepRange shown = three_steps.drag(ScrubPart::kBox, {-392, 8}, 10.0f, 20.0f);
  EXPECT_DOUBLE_EQ(shown.first, 0.0);
  EXPECT_DOUBLE_EQ(shown.last, AppState::kMinSpanSteps);
}

// What the scrubber hands AppState, it shows: both a million steps and a handful.
TEST(ScrubTrack, AppStateShowsTheWholeOfAMillionStepRunAndEightSteps) {
  AppState state;
  state.begin_frame(0, 1'000'000);
  const ScrubTrack million(0.0f, 1000.0f, {0, 1'000'000}, AppState::kMinSpanSteps);
  const StepRange whole = million.whole_run();
  state.show_steps(whole.first, whole.last);
  state.begin_frame(0, 1'000'000);
  EXPECT_DOUBLE_EQ(state.view_first(), 0.0);
  EXPECT_DOUBLE_EQ(state.view_last(), 1'000'000.0);
  EXPECT_TRUE(state.follow_live()) << "a view reaching the newest step follows it";

  state.show_steps(500'000, 500'008);
  state.begin_frame(0, 1'000'000);
  EXPECT_DOUBLE_EQ(state.view_first(), 500'000.0);
  EXPECT_DOUBLE_EQ(state.view_last(), 500'008.0);
  EXPECT_FALSE(state.follow_live());
  // Narrower than the minimum is widened to it, never below.
  state.show_steps(100, 101);
  EXPECT_DOUBLE_EQ(state.view_last() - state.view_first(), AppState::kMinSpanSteps);
}

}  // namespace
}  // namespace keel::app::ui
