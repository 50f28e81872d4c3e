// Text that fits a column: long layer names and paths shortened where they say least.
//
// What it is for: a layer name cut at its end ("blocks.0.m", "wei") loses the part that tells
// layers apart. These functions shorten in the middle instead, and drop the leading dotted
// components that every row shown shares (filtering "mlp" shows only "blocks.*"), so the
// index and the parameter stay readable; the whole name is always in the row's tooltip.
// Widths come from a function (ImGui::CalcTextSize in the app, a character count in tests).
// Threads: plain functions of values.
// Never: touches ImGui.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace keel::app::ui {

using TextWidth = std::function<float(const std::string&)>;

// `text` itself when it fits `max_width`; else its start and a longer end around `ellipsis`
// (a path's and a layer name's end is where they differ); `ellipsis` alone when nothing fits.
std::string elide_middle(const std::string& text, float max_width, const TextWidth& width,
                         const std::string& ellipsis);

// A dotted name's components: "blocks.0.mlp.fc.weight" -> blocks, 0, mlp, fc, weight.
std::vector<std::string> dotted_parts(const std::string& name);

// How many leading dotted components every name of `names` shares, never counting a name's
// last component ("blocks.0.mlp.fc.weight" and "blocks.2.mlp.proj.bias": 1).
size_t shared_leading_parts(const std::vector<std::string>& names);

// A layer's name for a column `max_width` wide: whole when it fits; else without its first
// `shared_parts` components (those every row shown shares), marked by `ellipsis` in front;
// else that, elided in the middle.
std::string fit_layer_name(const std::string& name, size_t shared_parts, float max_width, const TextWidth& width,
                           const std::string& ellipsis);

}  // namespace keel::app::ui
