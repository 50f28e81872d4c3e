// keel app screenshot: the current framebuffer as a PNG file.
//
// What it is for: headless checks (`keel --screenshot PATH`): a test looks at real pixels
// rendered by the real app under Xvfb.
// Threads: the UI thread, with the window's GL context current, after rendering a frame and
// before swapping buffers.
// Never: throws; returns false (and says why in `error`) when the file cannot be written.
#pragma once

#include <string>

namespace keel::app::ui {

bool write_framebuffer_png(int width, int height, const std::string& path, std::string& error);

}  // namespace keel::app::ui
