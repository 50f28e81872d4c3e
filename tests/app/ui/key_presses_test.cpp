// A key pressed and released within one event wait still counts as pressed, once, in the next
// frame (ImGui 1.86 alone would miss it: it samples the key state at NewFrame).
#include <gtest/gtest.h>

#include <imgui.h>

#include "ui/key_presses.hpp"

namespace {

using keel::app::ui::begin_frame_key_presses;
using keel::app::ui::key_pressed;
using keel::app::ui::record_key_press;

constexpr int kGlfwDown = 264;   // GLFW_KEY_DOWN
constexpr int kGlfwSpace = 32;   // GLFW_KEY_SPACE

class KeyPresses : public ::testing::Test {
 protected:
  void SetUp() override {
    ImGui::CreateContext();
    // As the GLFW backend maps them.
    ImGui::GetIO().KeyMap[ImGuiKey_DownArrow] = kGlfwDown;
    ImGui::GetIO().KeyMap[ImGuiKey_Space] = kGlfwSpace;
    keel::app::ui::enable_key_press_log();
    begin_frame_key_presses();   // nothing left from another test
  }
  void TearDown() override { ImGui::DestroyContext(); }
};

TEST_F(KeyPresses, ATapBetweenFramesCountsOnceInTheNextFrame) {
  record_key_press(kGlfwDown, false);   // press and release in the same wait
  EXPECT_FALSE(key_pressed(ImGuiKey_DownArrow)) << "counted before its frame began";
  begin_frame_key_presses();
  EXPECT_TRUE(key_pressed(ImGuiKey_DownArrow));
  EXPECT_TRUE(key_pressed(ImGuiKey_DownArrow)) << "asking twice in a frame is the same press";
  EXPECT_FALSE(key_pressed(ImGuiKey_Space));
  begin_frame_key_presses();
  EXPECT_FALSE(key_pressed(ImGuiKey_DownArrow)) << "the press leaked into a second frame";
}

TEST_F(KeyPresses, AutoRepeatCountsOnlyWhenAskedFor) {
  record_key_press(kGlfwSpace, true);
  begin_frame_key_presses();
  EXPECT_TRUE(key_pressed(ImGuiKey_Space, true));
  EXPECT_FALSE(key_pressed(ImGuiKey_Space, false)) << "a held space toggled follow-live repeatedly";
}

// F goes to the first non-finite: a letter ImGui 1.86 has no name for, read by GLFW's code.
TEST_F(KeyPresses, ALetterIsReadByItsGlfwCode) {
  record_key_press('F', false);
  begin_frame_key_presses();
  EXPECT_TRUE(keel::app::ui::letter_pressed('F'));
  EXPECT_FALSE(keel::app::ui::letter_pressed('G'));
  EXPECT_FALSE(keel::app::ui::letter_pressed('f')) << "upper case names the key";
  record_key_press('F', true);
  begin_frame_key_presses();
  EXPECT_FALSE(keel::app::ui::letter_pressed('F')) << "holding F goes there once";
}

// Ctrl+O opens the Open dialog: xdotool's ctrl+o lets go of Control before the frame begins,
// so the press carries its modifier; a plain O is not Ctrl+O, nor Ctrl+P.
TEST_F(KeyPresses, ALetterWithControlIsReadFromThePressItself) {
  record_key_press('O', false, true);
  record_key_press('P', false, false);
  begin_frame_key_presses();
  EXPECT_TRUE(keel::app::ui::ctrl_letter_pressed('O'));
  EXPECT_FALSE(keel::app::ui::ctrl_letter_pressed('P')) << "P came without Control";
  record_key_press('O', false, false);
  begin_frame_key_presses();
  EXPECT_FALSE(keel::app::ui::ctrl_letter_pressed('O')) << "a plain O is not Ctrl+O";
  EXPECT_TRUE(keel::app::ui::letter_pressed('O'));
}

}  // namespace
