#include "ui/window.hpp"

#include <algorithm>
#include <cfloat>
#include <cstdio>
#include <stdexcept>

#include <GLFW/glfw3.h>
#include <imgui.h>
#include <imgui_impl_glfw.h>
#include <imgui_impl_opengl3.h>

#include "ui/dropped_paths.hpp"
#include "ui/fonts.hpp"
#include "ui/gl_image_texture.hpp"
#include "ui/key_presses.hpp"

namespace keel::app::ui {
namespace {

void report_glfw_error(int code, const char* description) {
  std::fprintf(stderr, "keel: GLFW error %d: %s\n", code, description);
}

struct ContextAttempt {
  int major, minor;
  bool core;
  const char* glsl;
};

// 3.3 core first (what current drivers prefer); 3.0 for drivers without core profiles.
constexpr ContextAttempt kAttempts[] = {{3, 3, true, "#version 330 core"},
                                        {3, 0, false, "#version 130"}};

}  // namespace

Window::Window(const std::string& title, int width, int height) {
  glfwSetErrorCallback(report_glfw_error);
  if (!glfwInit()) throw std::runtime_error("cannot initialise GLFW (is there a display?)");

  const char* glsl = nullptr;
  for (const ContextAttempt& attempt : kAttempts) {
    glfwDefaultWindowHints();
    glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, attempt.major);
    glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, attempt.minor);
    if (attempt.core) {
      glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
      glfwWindowHint(GLFW_OPENGL_FORWARD_COMPAT, GLFW_TRUE);
    }
    window_ = glfwCreateWindow(width, height, title.c_str(), nullptr, nullptr);
    if (window_) {
      glsl = attempt.glsl;
      break;
    }
  }
  if (!window_) {
    glfwTerminate();
    throw std::runtime_error("cannot create a window with an OpenGL 3 context");
  }
  glfwMakeContextCurrent(window_);
  glfwSwapInterval(1);

  float scale_x = 1.0f, scale_y = 1.0f;
  glfwGetWindowContentScale(window_, &scale_x, &scale_y);
  content_scale_ = std::clamp(std::max(scale_x, scale_y), 1.0f, 4.0f);

  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGuiIO& io = ImGui::GetIO();
  // A dashboard has one fixed layout; an imgui.ini in the user's working directory would only
  // surprise them.
  io.IniFilename = nullptr;
  // Keyboard navigation stays off: up/down/space/Home are the dashboard's own keys.
  ImGui::StyleColorsDark();
  ImGui::GetStyle().ScaleAllSizes(content_scale_);
  load_fonts(content_scale_);
  ImGui_ImplGlfw_InitForOpenGL(window_, true);
  // After the backend's own callbacks: ours records each press, then hands the event on.
  glfwSetKeyCallback(window_, [](GLFWwindow* window, int key, int scancode, int action, int mods) {
    if (action == GLFW_PRESS || action == GLFW_REPEAT) {
      record_key_press(key, action == GLFW_REPEAT, (mods & GLFW_MOD_CONTROL) != 0);
    }
    ImGui_ImplGlfw_KeyCallback(window, key, scancode, action, mods);
  });
  enable_key_press_log();
  // A file dropped on the window is a request to open it, taken by the dashboard next frame.
  glfwSetDropCallback(window_, [](GLFWwindow*, int count, const char** paths) { record_dropped_paths(count, paths); });
  ImGui_ImplOpenGL3_Init(glsl);
  install_image_texture_factory(&gl_image_texture_factory());
}

Window::~Window() {
  ImGui_ImplOpenGL3_Shutdown();
  ImGui_ImplGlfw_Shutdown();
  ImGui::DestroyContext();
  glfwDestroyWindow(window_);
  glfwTerminate();
}

bool Window::should_close() const { return glfwWindowShouldClose(window_); }

void Window::wait(double max_secs) {
  if (max_secs > 0) {
    glfwWaitEventsTimeout(max_secs);
  } else {
    glfwPollEvents();
  }
}

void Window::wake() { glfwPostEmptyEvent(); }

void Window::begin_frame() {
  begin_frame_key_presses();
  ImGui_ImplOpenGL3_NewFrame();
  ImGui_ImplGlfw_NewFrame();
  if (pointer_ignored_) {
    // After the backend wrote this frame's pointer state: ImGui's own "no mouse" position.
    ImGuiIO& io = ImGui::GetIO();
    io.MousePos = ImVec2(-FLT_MAX, -FLT_MAX);
    for (bool& down : io.MouseDown) down = false;
    io.MouseWheel = io.MouseWheelH = 0;
  }
  ImGui::NewFrame();
}

void Window::render() {
  ImGui::Render();
  int width = 0, height = 0;
  glfwGetFramebufferSize(window_, &width, &height);
  glViewport(0, 0, width, height);
  glClearColor(0.08f, 0.08f, 0.09f, 1.0f);
  glClear(GL_COLOR_BUFFER_BIT);
  ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
}

void Window::present() { glfwSwapBuffers(window_); }

void Window::framebuffer_size(int& width, int& height) const {
  glfwGetFramebufferSize(window_, &width, &height);
}

}  // namespace keel::app::ui
