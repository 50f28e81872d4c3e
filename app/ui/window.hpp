// keel app Window: the one GLFW window with an OpenGL 3 context and Dear ImGui on top.
//
// What it is for: keeping platform code (GLFW, GL context, ImGui backends, fonts) out of the
// main loop and the views. Creates a GL 3.3 core context and falls back to 3.0 (Mesa llvmpipe
// under Xvfb offers either, some drivers only one).
// It also installs GL image textures (gl_image_texture.hpp) on its ImGui context.
// Threads: the UI (main) thread only, for every call but wake(): GLFW and GL are
// single-threaded.
// Never: throws after construction. The constructor throws std::runtime_error saying what
// failed (no display, no GL 3 context) so main can print it and exit.
#pragma once

#include <string>

#include "ui/frame_pacer.hpp"

struct GLFWwindow;

namespace keel::app::ui {

class Window final : public EventWait {
 public:
  Window(const std::string& title, int width, int height);
  Window(const Window&) = delete;
  Window& operator=(const Window&) = delete;
  ~Window() override;

  bool should_close() const;
  // Waits at most `max_secs` for input (handling it) or wake(); FramePacer decides how long.
  void wait(double max_secs) override;
  // Any thread (glfwPostEmptyEvent is thread-safe): ends a wait() in progress, or the next.
  void wake() override;
  // Starts an ImGui frame with the input handled by the last wait().
  void begin_frame();
  // The pointer is not there for the frames to come (no hover, no tooltip, no click): a
  // screenshot shows the data, not wherever the pointer happens to sit.
  void ignore_pointer() { pointer_ignored_ = true; }
  // Renders the ImGui frame into the back buffer; call present() after reading pixels.
  void render();
  void present();
  void framebuffer_size(int& width, int& height) const;
  // Pixels per logical unit of the monitor (1 on a 96-dpi screen).
  float content_scale() const { return content_scale_; }

 private:
  GLFWwindow* window_ = nullptr;
  float content_scale_ = 1.0f;
  bool pointer_ignored_ = false;
};

}  // namespace keel::app::ui
