// keel app status bar: is the dashboard receiving, from what, and how healthy is the stream.
//
// What it is for: the one line a user glances at first: each endpoint's link state
// (connecting / live / stale / protocol mismatch) and each file opened (--open: loading, read,
// or why it could not be), the run and its ranks, the step, training
// speed, everything lost on the way (probe drops, sequence gaps, UI queue drops, undecodable
// messages) and the probe's overhead (its time per step over the step's wall time).
// Threads: the UI thread, inside an ImGui window.
#pragma once

#include <cstdint>
#include <vector>

#include "model/model.hpp"
#include "values/endpoint_state.hpp"
#include "values/frame_input.hpp"

namespace keel::app::ui {

// `run` is the run shown by the other panes (nullptr before any telemetry).
void draw_status_bar(const FrameInput& input, const Model& model, const RunModel* run);

}  // namespace keel::app::ui
