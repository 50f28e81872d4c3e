// Short labels that still tell several names apart: the legend of runs overlaid in one chart.
//
// What it is for: two runs opened together are named by their run ids ("vm-5999-1795616067812"
// and "vm-6011-1795616099931"): written whole, the legend runs into the chart's title, and
// what tells them apart is a few characters in the middle. These functions drop the leading
// and trailing parts that every name shares (whole parts between separators: - _ . / : and
// space, so a number is never cut in two), then elide what is left in the middle to fit
// (text_fit.hpp). The caller shows the whole name in a tooltip.
// Threads: plain functions of values.
// Never: touches ImGui; returns an empty label for a non-empty name.
#pragma once

#include <string>
#include <vector>

#include "ui/text_fit.hpp"

namespace keel::app::ui {

// Each name without the leading and trailing parts all of `names` share. Names are returned
// whole when there are fewer than two, when they are all the same, or where dropping the
// shared parts would leave one of them empty ("run" beside "run-2").
std::vector<std::string> distinct_parts(const std::vector<std::string>& names);

// distinct_parts(), each elided in the middle to `max_width` (elide_middle).
std::vector<std::string> short_distinct_labels(const std::vector<std::string>& names, float max_width,
                                               const TextWidth& width, const std::string& ellipsis);

}  // namespace keel::app::ui
