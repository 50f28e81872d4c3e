// Files the user asks to open reach Dashboard::take_open_requests: dropped on the window, or
// typed into the Open dialog that Ctrl+O opens. The dashboard is drawn for real, in an ImGui
// context without a window; the key and drop callbacks are fed as GLFW would feed them.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <imgui.h>

#include "model/model.hpp"
#include "ui/dashboard.hpp"
#include "ui/dropped_paths.hpp"
#include "ui/key_presses.hpp"
#include "values/frame_input.hpp"

namespace keel::app::ui {
namespace {

constexpr int kGlfwEnter = 257;    // GLFW_KEY_ENTER
constexpr int kGlfwEscape = 256;   // GLFW_KEY_ESCAPE

class OpenRequests : public ::testing::Test {
 protected:
  void SetUp() override {
    ImGui::CreateContext();
    ImGuiIO& io = ImGui::GetIO();
    io.IniFilename = nullptr;
    io.DisplaySize = ImVec2(1600, 1000);
    io.DeltaTime = 1.0f / 60.0f;
    // As the GLFW backend maps them.
    io.KeyMap[ImGuiKey_Enter] = kGlfwEnter;
    io.KeyMap[ImGuiKey_Escape] = kGlfwEscape;
    unsigned char* pixels = nullptr;
    int width = 0, height = 0;
    io.Fonts->GetTexDataAsRGBA32(&pixels, &width, &height);
    io.Fonts->SetTexID(reinterpret_cast<ImTextureID>(intptr_t{1}));
    enable_key_press_log();
    begin_frame_key_presses();   // nothing left from another test
    take_dropped_paths();
  }
  void TearDown() override { ImGui::DestroyContext(); }

  void frame() {
    begin_frame_key_presses();
    ImGui::NewFrame();
    dashboard_.draw(model_, input_);
    ImGui::Render();
  }

  Model model_;
  FrameInput input_;
  Dashboard dashboard_;
};

TEST_F(OpenRequests, FilesDroppedOnTheWindowAreRequestedOnceInOrder) {
  const char* dropped[] = {"/runs/yesterday.keelrec", "/runs/today.keelrec"};
  record_dropped_paths(2, dropped);
  frame();
  EXPECT_EQ(dashboard_.take_open_requests(),
            (std::vector<std::string>{"/runs/yesterday.keelrec", "/runs/today.keelrec"}));
  frame();
  EXPECT_TRUE(dashboard_.take_open_requests().empty()) << "a drop was requested twice";
}

TEST_F(OpenRequests, CtrlOOpensTheDialogAndEnterRequestsThePathTyped) {
  frame();
  record_key_press('O', false, true);
  frame();   // the dialog opens
  frame();   // its path field takes the keyboard
  ImGui::GetIO().AddInputCharactersUTF8("keel-runs/night.keelrec");
  frame();
  EXPECT_TRUE(dashboard_.take_open_requests().empty()) << "requested before Enter";
  ImGui::GetIO().KeysDown[kGlfwEnter] = true;
  frame();
  ImGui::GetIO().KeysDown[kGlfwEnter] = false;
  frame();
  EXPECT_EQ(dashboard_.take_open_requests(), (std::vector<std::string>{"keel-runs/night.keelrec"}));
}

TEST_F(OpenRequests, EscapeClosesTheDialogWithoutARequest) {
  frame();
  record_key_press('O', false, true);
  frame();
  frame();
  ImGui::GetIO().AddInputCharactersUTF8("keel-runs/night.keelrec");
  frame();
  record_key_press(kGlfwEscape, false);
  frame();
  // Enter now reaches no dialog: nothing is requested.
  ImGui::GetIO().KeysDown[kGlfwEnter] = true;
  frame();
  ImGui::GetIO().KeysDown[kGlfwEnter] = false;
  frame();
  EXPECT_TRUE(dashboard_.take_open_requests().empty());
}

}  // namespace
}  // namespace keel::app::ui
