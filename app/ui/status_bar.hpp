// keel app status bar: is the dashboard receiving, from what, and how healthy is the stream.
//
// What it is for: the one line a user glances at first: each endpoint's link state
// (connecting / live / stale / protocol mismatch) and each file opened (--open: loading, its
// first picture while the rest is read, read, or why it could not be), the run and its ranks,
// an offer to read a live run's older steps from its recording, the step, training
// speed, everything lost on the way (probe drops, sequence gaps, UI queue drops, undecodable
// messages) and the probe's overhead (its time per step over the step's wall time).
// Threads: the UI thread, inside an ImGui window.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/model.hpp"
#include "values/endpoint_state.hpp"
#include "values/frame_input.hpp"

namespace keel::app::ui {

// `run` is the run shown by the other panes (nullptr before any telemetry). A live run whose
// recording is on this machine and holds older steps than the model gets a button that asks,
// into `open_requests`, for that file to be read.
void draw_status_bar(const FrameInput& input, const Model& model, const RunModel* run,
                     std::vector<std::string>* open_requests = nullptr);

}  // namespace keel::app::ui
