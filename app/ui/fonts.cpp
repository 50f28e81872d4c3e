#include "ui/fonts.hpp"

#include <cstdio>

#include <imgui.h>

namespace keel::app::ui {

bool load_fonts(float content_scale) {
  ImGuiIO& io = ImGui::GetIO();
  const float size_px = kBaseFontSizePx * content_scale;
  // AddFontFromFileTTF asserts on a missing file in some builds, so check first.
  if (std::FILE* file = std::fopen(kDejaVuSansPath, "rb")) {
    std::fclose(file);
    ImFontConfig config;
    config.OversampleH = 2;
    if (io.Fonts->AddFontFromFileTTF(kDejaVuSansPath, size_px, &config)) return true;
  }
  ImFontConfig config;
  config.SizePixels = 13.0f * content_scale;
  io.Fonts->AddFontDefault(&config);
  return false;
}

}  // namespace keel::app::ui
