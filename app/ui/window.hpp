// keel app Window: the one GLFW window with an OpenGL 3 context and Dear ImGui on top.
//
// What it is for: keeping platform code (GLFW, GL context, ImGui backends, fonts) out of the
// main loop and the views. Creates a GL 3.3 core context and falls back to 3.0 (Mesa llvmpipe
// under Xvfb offers either, some drivers only one).
// Threads: the UI (main) thread only, for every call: GLFW and GL are single-threaded.
// Never: throws after construction. The constructor throws std::runtime_error saying what
// failed (no display, no GL 3 context) so main can print it and exit.
#pragma once

#include <string>

struct GLFWwindow;

namespace keel::app::ui {

class Window {
 public:
  Window(const std::string& title, int width, int height);
  Window(const Window&) = delete;
  Window& operator=(const Window&) = delete;
  ~Window();

  bool should_close() const;
  // Polls input (waits at most `max_wait_secs` for an event, so an idle dashboard does not
  // spin a CPU core) and starts an ImGui frame.
  void begin_frame(double max_wait_secs);
  // Renders the ImGui frame into the back buffer; call present() after reading pixels.
  void render();
  void present();
  void framebuffer_size(int& width, int& height) const;
  // Pixels per logical unit of the monitor (1 on a 96-dpi screen).
  float content_scale() const { return content_scale_; }

 private:
  GLFWwindow* window_ = nullptr;
  float content_scale_ = 1.0f;
};

}  // namespace keel::app::ui
