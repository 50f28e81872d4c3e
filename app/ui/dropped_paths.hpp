// Files dropped on the window, as GLFW delivered them, until the dashboard takes them.
//
// What it is for: a user drags a recording (or a dump's telemetry.msgpack) from a file manager
// onto the dashboard to open it. GLFW reports a drop through a callback, between frames,
// with paths valid only during the call; the window's callback copies them here, and the
// dashboard takes them at its next frame and hands them over as open requests
// (Dashboard::take_open_requests). Views never open files themselves.
// Threads: the UI thread only (GLFW calls the drop callback on the thread that waits for events).
// Never: opens or checks a file; holds more than kMaxDroppedPaths paths (a drop of a whole
// folder's thousands of files keeps the first ones).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace keel::app::ui {

inline constexpr size_t kMaxDroppedPaths = 64;

// From the GLFW drop callback: `count` paths, copied.
void record_dropped_paths(int count, const char** paths);
// The paths dropped since the last call, in the order dropped.
std::vector<std::string> take_dropped_paths();

}  // namespace keel::app::ui
