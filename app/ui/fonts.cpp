#include "ui/fonts.hpp"

#include <cstdio>

#include <imgui.h>

namespace keel::app::ui {
namespace {

// Latin-1 (ImGui's default range) and the ellipsis, which elided names and paths use.
constexpr ImWchar kGlyphRanges[] = {0x0020, 0x00FF, 0x2026, 0x2026, 0};
const char* loaded_ellipsis = "...";

}  // namespace

const char* ellipsis() { return loaded_ellipsis; }

bool load_fonts(float content_scale) {
  ImGuiIO& io = ImGui::GetIO();
  const float size_px = kBaseFontSizePx * content_scale;
  // AddFontFromFileTTF asserts on a missing file in some builds, so check first.
  if (std::FILE* file = std::fopen(kDejaVuSansPath, "rb")) {
    std::fclose(file);
    ImFontConfig config;
    config.OversampleH = 2;
    if (io.Fonts->AddFontFromFileTTF(kDejaVuSansPath, size_px, &config, kGlyphRanges)) {
      loaded_ellipsis = "\u2026";
      return true;
    }
  }
  ImFontConfig config;
  config.SizePixels = 13.0f * content_scale;
  io.Fonts->AddFontDefault(&config);
  return false;
}

}  // namespace keel::app::ui
