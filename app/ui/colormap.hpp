// keel app colormap: values -> colours for the layer heatmap and its legend.
//
// What it is for: one perceptually uniform map (viridis: readable by colour-blind users, and
// monotone in lightness so "brighter = larger" holds in a screenshot), plus the reserved colours
// that must never be confused with a value: non-finite cells and "no data".
// Threads: pure functions; any thread.
#pragma once

#include <cstdint>

namespace keel::app::ui {

// ImU32 layout (ABGR, as ImGui's IM_COL32).
using Rgba = uint32_t;

// t in [0, 1] (clamped) -> viridis colour.
Rgba viridis(float t);

// Not on the viridis path (which runs blue-green-yellow): a saturated red-magenta stands out.
inline constexpr Rgba kNonfiniteColour = 0xFF4020FFu;  // IM_COL32(255, 32, 64, 255)
inline constexpr Rgba kNoDataColour = 0xFF261E1Eu;     // IM_COL32(30, 30, 38, 255)
// A rewind's abandoned span (RunModel::abandoned_spans()): grey, drawn under the continuation.
inline constexpr Rgba kAbandonedColour = 0xAA969696u;  // IM_COL32(150, 150, 150, 170)
inline constexpr Rgba kSkippedColour = 0xFF20A0FFu;    // IM_COL32(255, 160, 32, 255)
// A layer with no gradient to measure (frozen or unused): a slate grey, lighter than no data
// and off the viridis path, so a frozen layer does not read as a dead one.
inline constexpr Rgba kNoGradientColour = 0xFF66574Au;  // IM_COL32(74, 87, 102, 255)
// The name or values of such a layer, in the layer list and the heatmap's labels.
inline constexpr Rgba kNoGradientText = 0xFFAA8C78u;    // IM_COL32(120, 140, 170, 255)

}  // namespace keel::app::ui
