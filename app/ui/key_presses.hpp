// Key presses as GLFW delivered them, counted per frame.
//
// What it is for: Dear ImGui 1.86 reads the keyboard as a state (io.KeysDown) sampled at
// NewFrame, so a press and its release handled in the same event wait (a quick tap, or
// xdotool's synthetic key, which sends both back to back) never shows as "pressed". The
// window's GLFW key callback records every press here (and still forwards it to ImGui), and
// the dashboard asks key_pressed() instead of ImGui::IsKeyPressed. Without the callback (the
// benchmark's window-less ImGui context) key_pressed() falls back to ImGui.
// Threads: the UI thread only (GLFW calls key callbacks on the thread that waits for events).
#pragma once

#include <imgui.h>

namespace keel::app::ui {

// From the GLFW key callback: `glfw_key` went down (`repeat`: an auto-repeat while held;
// `ctrl`: with Control held, as the press's own modifiers say: by NewFrame a quick Ctrl+O has
// let go of Control too, so ImGui's io.KeyCtrl no longer shows it).
void record_key_press(int glfw_key, bool repeat, bool ctrl = false);
// The window calls this once the callback is installed.
void enable_key_press_log();
// Before ImGui::NewFrame: presses recorded since the last call become this frame's.
void begin_frame_key_presses();
// Whether `key` was pressed this frame (with `repeat`, auto-repeats count too).
bool key_pressed(ImGuiKey key, bool repeat = true);
// Whether the letter key `upper` ('A'..'Z') was pressed this frame, auto-repeats not counted.
// Dear ImGui 1.86 names only the letters of its own shortcuts (A, C, V, X, Y, Z); GLFW's key
// code of a letter is its upper-case ASCII code.
bool letter_pressed(char upper);
// Whether the letter key `upper` was pressed with Control held this frame (Ctrl+O), no repeats.
bool ctrl_letter_pressed(char upper);

}  // namespace keel::app::ui
