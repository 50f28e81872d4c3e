// keel app fonts: a readable UI font, sized for the screen.
//
// What it is for: ImGui's built-in bitmap font (ProggyClean 13 px) is hard to read on a
// dashboard watched from a distance and blurry when scaled. DejaVu Sans (Debian's
// fonts-dejavu-core) is used when installed, rasterised at the monitor's scale; otherwise the
// built-in font, scaled.
// Threads: the UI thread, after ImGui::CreateContext() and before the first frame.
// Never: fails: a missing or unreadable font file falls back to the built-in font.
#pragma once

namespace keel::app::ui {

inline constexpr const char* kDejaVuSansPath = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
inline constexpr float kBaseFontSizePx = 15.0f;

// Returns true when DejaVu Sans was loaded.
bool load_fonts(float content_scale);

// The ellipsis the loaded font draws: U+2026 with DejaVu Sans (loaded with that glyph), "..."
// with the built-in font, which has none.
const char* ellipsis();

}  // namespace keel::app::ui
