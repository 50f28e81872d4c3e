// keel app frame work: what the UI thread does in every frame between NewFrame and Render.
//
// What it is for: keel's main loop and keel-bench-app's step-to-pixel loop call this one
// function, so the benchmark times the app's own frame and not a copy of it.
// Threads: the UI thread, inside an ImGui frame.
// Never: blocks (Receiver::drain takes a short lock), throws.
#pragma once

#include <vector>

#include "keel/wire/messages.hpp"
#include "model/model.hpp"
#include "net/receiver.hpp"
#include "ui/dashboard.hpp"

namespace keel::app::ui {

// Takes every message the receiver decoded, ingests it into `model`, and draws the dashboard.
// On return `inbox` holds exactly the messages this frame ingested (it is cleared first).
void ingest_and_draw(Receiver& receiver, Model& model, Dashboard& dashboard,
                     std::vector<wire::Message>& inbox);

}  // namespace keel::app::ui
