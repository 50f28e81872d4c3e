#include "ui/key_presses.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include <GLFW/glfw3.h>

namespace keel::app::ui {
namespace {

struct Press {
  int key = 0;
  bool repeat = false;
  bool ctrl = false;
};

// Both bounded by the number of key events of one frame's wait; UI thread only.
bool log_enabled = false;
std::vector<Press> pending;
std::vector<Press> this_frame;

}  // namespace

void record_key_press(int glfw_key, bool repeat, bool ctrl) {
  if (pending.size() < 256) pending.push_back(Press{glfw_key, repeat, ctrl});
}

void enable_key_press_log() { log_enabled = true; }

void begin_frame_key_presses() {
  this_frame.clear();
  std::swap(this_frame, pending);
}

namespace {

bool index_pressed(int index, bool repeat) {
  if (!log_enabled) return ImGui::IsKeyPressed(index, repeat);
  return std::any_of(this_frame.begin(), this_frame.end(),
                     [&](const Press& p) { return p.key == index && (repeat || !p.repeat); });
}

}  // namespace

bool key_pressed(ImGuiKey key, bool repeat) {
  // The GLFW backend maps ImGui's named keys to GLFW key codes (io.KeyMap).
  return index_pressed(ImGui::GetKeyIndex(key), repeat);
}

bool letter_pressed(char upper) {
  static_assert(GLFW_KEY_A == 'A' && GLFW_KEY_F == 'F' && GLFW_KEY_Z == 'Z');
  if (upper < 'A' || upper > 'Z') return false;
  return index_pressed(int(upper), false);
}

bool ctrl_letter_pressed(char upper) {
  if (upper < 'A' || upper > 'Z') return false;
  if (!log_enabled) return ImGui::GetIO().KeyCtrl && ImGui::IsKeyPressed(int(upper), false);
  return std::any_of(this_frame.begin(), this_frame.end(),
                     [&](const Press& p) { return p.key == int(upper) && p.ctrl && !p.repeat; });
}

}  // namespace keel::app::ui
