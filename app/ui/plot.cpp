#include "ui/plot.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "ui/app_state.hpp"
#include "ui/colormap.hpp"
#include "model/column_grid.hpp"

namespace keel::app::ui {
namespace {

constexpr ImU32 kAxisColour = IM_COL32(110, 110, 120, 255);
constexpr ImU32 kGridColour = IM_COL32(60, 60, 68, 255);
constexpr ImU32 kLabelColour = IM_COL32(180, 180, 190, 255);
constexpr ImU32 kBackground = IM_COL32(22, 22, 28, 255);
constexpr ImU32 kCursorColour = IM_COL32(230, 230, 230, 110);
constexpr ImU32 kSelectedColour = IM_COL32(255, 255, 255, 200);

double to_axis(double value, bool log_y) {
  if (!log_y) return value;
  return value > 0 ? std::log10(value) : -std::numeric_limits<double>::infinity();
}

// 1, 2 or 5 times a power of ten, about range / target_count.
double nice_step(double range, int target_count) {
  const double raw = range / std::max(1, target_count);
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  const double scaled = raw / power;
  return (scaled < 1.5 ? 1.0 : scaled < 3.5 ? 2.0 : scaled < 7.5 ? 5.0 : 10.0) * power;
}

void fit_range(const std::vector<const std::vector<Summary>*>& series, bool log_y, double& low,
               double& high) {
  low = std::numeric_limits<double>::infinity();
  high = -low;
  for (const auto* columns : series) {
    for (const Summary& c : *columns) {
      if (!c.has_finite()) continue;
      const double lo = to_axis(c.min, log_y), hi = to_axis(c.max, log_y);
      if (std::isfinite(lo)) low = std::min(low, lo);
      if (std::isfinite(hi)) high = std::max(high, hi);
      // On a log axis a column of zeros has no place; its max may still.
      if (!std::isfinite(lo) && std::isfinite(hi)) low = std::min(low, hi);
    }
  }
  if (!(low <= high)) {
    low = log_y ? -3 : 0;
    high = log_y ? 0 : 1;
  }
  // A constant series still gets a readable range around its value.
  double pad = (high - low) * 0.06;
  if (log_y) pad = std::max(pad, 0.1);
  if (!log_y && high - low < 1e-12) pad = high != 0 ? std::abs(high) * 0.1 : 1.0;
  low -= pad;
  high += pad;
}

}  // namespace

float PlotFrame::x_px(double step) const {
  const double span = std::max(1e-9, x_last - x_first);
  return float(min.x + (step - x_first) / span * (max.x - min.x));
}

double PlotFrame::step_at(float px) const {
  return x_first + double(px - min.x) / std::max(1.0f, max.x - min.x) * (x_last - x_first);
}

float PlotFrame::y_px(double value) const {
  const double v = to_axis(value, log_y);
  if (!std::isfinite(v)) return max.y;
  const double t = (v - y_low) / std::max(1e-12, y_high - y_low);
  return std::clamp(float(max.y - t * (max.y - min.y)), min.y - 1.0f, max.y + 1.0f);
}

std::string format_value(double value) {
  char text[32];
  const double magnitude = std::abs(value);
  if (!std::isfinite(value)) {
    std::snprintf(text, sizeof text, "%s", std::isnan(value) ? "NaN" : value > 0 ? "+Inf" : "-Inf");
  } else if (value == 0) {
    std::snprintf(text, sizeof text, "0");
  } else if (magnitude >= 1e5 || magnitude < 1e-2) {
    std::snprintf(text, sizeof text, "%.2g", value);
  } else {
    std::snprintf(text, sizeof text, "%.4g", value);
  }
  return text;
}

PlotFrame begin_plot(const char* title, ImVec2 size, double x_first, double x_last, bool log_y) {
  const float font = ImGui::GetFontSize();
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  size.x = std::max(size.x, 8 * font);
  size.y = std::max(size.y, 4 * font);
  ImGui::InvisibleButton(title, size);

  PlotFrame frame;
  frame.hovered = ImGui::IsItemHovered();
  frame.active = ImGui::IsItemActive();
  // Room for the title above, y labels on the left, step labels below.
  frame.min = ImVec2(origin.x + 4.2f * font, origin.y + font * 1.3f);
  frame.max = ImVec2(origin.x + size.x - font * 0.5f, origin.y + size.y - font * 1.3f);
  frame.x_first = x_first;
  frame.x_last = x_last;
  frame.log_y = log_y;
  return frame;
}

void fit_y(PlotFrame& frame, const std::vector<const std::vector<Summary>*>& series) {
  fit_range(series, frame.log_y, frame.y_low, frame.y_high);
}

int frame_columns(const PlotFrame& frame) {
  return std::max(1, int(frame.max.x - frame.min.x));
}

std::vector<AxisTick> y_axis_ticks(const PlotFrame& frame, float font_px) {
  std::vector<AxisTick> ticks;
  // Whole decades on a log axis when it spans at least one, otherwise 1-2-5 steps.
  const double y_range = frame.y_high - frame.y_low;
  const int target = std::max(2, int((frame.max.y - frame.min.y) / (font_px * 2.5f)));
  // On a log axis of less than two decades, powers of ten are too sparse: tick 1-2-5 values
  // of the data's own range instead (placed logarithmically).
  const bool decades = frame.log_y && y_range >= 2.0;
  const bool log_linear = frame.log_y && !decades;
  const double low = log_linear ? std::pow(10.0, frame.y_low) : frame.y_low;
  const double high = log_linear ? std::pow(10.0, frame.y_high) : frame.y_high;
  double step = decades ? std::max(1.0, std::ceil(y_range / target)) : nice_step(high - low, target);
  // Labels must not overlap on a short plot: widen the step until they are a line apart.
  const double px_per_unit = (frame.max.y - frame.min.y) / std::max(1e-12, decades || !log_linear ? y_range : high - low);
  while (step * px_per_unit < font_px * 1.3 && step < 1e30) step *= 2;
  // Ticks placed logarithmically still crowd together towards the top (0.2, 0.4, 0.6 within
  // a line): a label closer than a line to the one below it is left out; its grid line stays.
  float last_label_y = std::numeric_limits<float>::infinity();
  for (double t = std::ceil(low / step) * step; t <= high; t += step) {
    const double value = decades ? std::pow(10.0, t) : t;
    if (frame.log_y && value <= 0) continue;
    AxisTick tick;
    tick.value = value;
    tick.y = frame.y_px(value);
    if (last_label_y - tick.y >= font_px * 1.1f) {
      last_label_y = tick.y;
      char label[32];
      if (decades) {
        std::snprintf(label, sizeof label, "1e%d", int(std::lround(t)));
      } else {
        std::snprintf(label, sizeof label, "%s", format_value(std::abs(value) < step * 1e-6 ? 0 : value).c_str());
      }
      tick.label = label;
    }
    ticks.push_back(std::move(tick));
  }
  return ticks;
}

void draw_axes(ImDrawList* draw, const PlotFrame& frame, const char* title) {
  const float font = ImGui::GetFontSize();
  draw->AddRectFilled(frame.min, frame.max, kBackground);
  draw->AddText(ImVec2(frame.min.x, frame.min.y - font * 1.2f), kLabelColour, title);

  for (const AxisTick& tick : y_axis_ticks(frame, font)) {
    draw->AddLine(ImVec2(frame.min.x, tick.y), ImVec2(frame.max.x, tick.y), kGridColour);
    if (tick.label.empty()) continue;
    const ImVec2 text_size = ImGui::CalcTextSize(tick.label.c_str());
    draw->AddText(ImVec2(frame.min.x - text_size.x - font * 0.3f, tick.y - text_size.y * 0.5f),
                  kLabelColour, tick.label.c_str());
  }

  draw_step_axis(draw, frame, 0.0);
  draw->AddRect(frame.min, frame.max, kAxisColour);
}

void draw_step_axis(ImDrawList* draw, const PlotFrame& frame, double offset) {
  // Whole steps, about one label per six characters of width.
  const float font = ImGui::GetFontSize();
  const int x_target = std::max(2, int((frame.max.x - frame.min.x) / (font * 6)));
  const double x_step = std::max(1.0, nice_step(frame.x_last - frame.x_first, x_target));
  for (double s = std::ceil(frame.x_first / x_step) * x_step; s + offset <= frame.x_last; s += x_step) {
    const float x = frame.x_px(s + offset);
    draw->AddLine(ImVec2(x, frame.max.y), ImVec2(x, frame.max.y + font * 0.25f), kAxisColour);
    char label[32];
    std::snprintf(label, sizeof label, "%lld", static_cast<long long>(std::llround(s)));
    const ImVec2 text_size = ImGui::CalcTextSize(label);
    draw->AddText(ImVec2(x - text_size.x * 0.5f, frame.max.y + font * 0.2f), kLabelColour, label);
  }
}

int bridge_columns(const ColumnGrid& grid, int64_t steps) {
  if (steps <= 0 || grid.span_steps() <= 0) return 0;
  return int(std::ceil(double(steps) * grid.columns() / double(grid.span_steps())));
}

void draw_series(ImDrawList* draw, const PlotFrame& frame, const std::vector<Summary>& columns,
                 ImU32 colour, int bridge_columns) {
  if (columns.empty()) return;
  draw->PushClipRect(frame.min, frame.max, true);
  const float width = frame.max.x - frame.min.x;
  const float column_px = width / float(columns.size());
  // At most two points per column (max then min), joined into one polyline per finite run, so
  // a spike inside a column stays visible as a vertical stroke.
  ImVector<ImVec2> points;
  auto flush = [&]() {
    if (points.Size == 1) {
      draw->AddCircleFilled(points[0], 1.5f, colour);
    } else if (points.Size > 1) {
      draw->AddPolyline(points.Data, points.Size, colour, ImDrawFlags_None, 1.5f);
    }
    points.resize(0);
  };
  int empty_run = 0;   // empty columns since the last finite one
  for (size_t i = 0; i < columns.size(); ++i) {
    const Summary& c = columns[i];
    const float x = frame.min.x + (float(i) + 0.5f) * column_px;
    if (c.has_nonfinite()) {
      // Non-finite is the signal: a full-height band in its own colour, never interpolated.
      draw->AddRectFilled(ImVec2(x - std::max(1.0f, column_px * 0.5f), frame.min.y),
                          ImVec2(x + std::max(1.0f, column_px * 0.5f), frame.max.y),
                          (kNonfiniteColour & 0x00FFFFFFu) | 0x70000000u);
    }
    if (!c.has_finite()) {
      // A gap the series has by design is joined over; a longer one, or a non-finite value, is not.
      if (c.has_nonfinite() || ++empty_run > bridge_columns) flush();
      continue;
    }
    empty_run = 0;
    points.push_back(ImVec2(x, frame.y_px(c.max)));
    if (c.min != c.max) points.push_back(ImVec2(x, frame.y_px(c.min)));
  }
  flush();
  draw->PopClipRect();
}

void draw_flag_columns(ImDrawList* draw, const PlotFrame& frame, const std::vector<Summary>& flags,
                       ImU32 colour) {
  if (flags.empty()) return;
  const float column_px = (frame.max.x - frame.min.x) / float(flags.size());
  for (size_t i = 0; i < flags.size(); ++i) {
    if (!(flags[i].has_finite() && flags[i].max >= 0.5f)) continue;
    const float x = frame.min.x + (float(i) + 0.5f) * column_px;
    draw->AddLine(ImVec2(x, frame.min.y), ImVec2(x, frame.max.y), colour, 1.0f);
  }
}

void draw_step_marker(ImDrawList* draw, const PlotFrame& frame, int64_t step, bool across, ImU32 colour) {
  if (step < 0 || step < frame.x_first || step > frame.x_last) return;
  const float x = frame.x_px(double(step) + 0.5);
  const float half = std::max(4.0f, ImGui::GetFontSize() * 0.35f);
  if (across) draw->AddLine(ImVec2(x, frame.min.y), ImVec2(x, frame.max.y), colour, 2.0f);
  // Triangles outside the plot area point at the step: from above, and without the line from
  // below too (on the step axis).
  draw->AddTriangleFilled(ImVec2(x - half, frame.min.y - half * 1.6f), ImVec2(x + half, frame.min.y - half * 1.6f),
                          ImVec2(x, frame.min.y), colour);
  if (across) return;
  draw->AddTriangleFilled(ImVec2(x - half, frame.max.y + half * 1.6f), ImVec2(x + half, frame.max.y + half * 1.6f),
                          ImVec2(x, frame.max.y), colour);
}

void draw_cursors(ImDrawList* draw, const PlotFrame& frame, const AppState& state, bool marker_across) {
  draw_step_marker(draw, frame, state.warning_step(), marker_across, kWarningStepColour);
  draw_step_marker(draw, frame, state.marked_step(), marker_across);
  auto line = [&](int64_t step, ImU32 colour) {
    if (step < 0 || step < frame.x_first || step > frame.x_last) return;
    const float x = frame.x_px(double(step));
    draw->AddLine(ImVec2(x, frame.min.y), ImVec2(x, frame.max.y), colour, 1.0f);
  };
  line(state.selected_step(), kSelectedColour);
  line(state.cursor_step(), kCursorColour);
}

void handle_plot_input(const PlotFrame& frame, AppState& state) {
  const ImGuiIO& io = ImGui::GetIO();
  if (frame.hovered) {
    const double step = frame.step_at(io.MousePos.x);
    state.set_cursor_step(std::llround(step));
    if (io.MouseWheel != 0.0f) state.zoom(std::pow(0.85, double(io.MouseWheel)), step);
  }
  if (frame.active && io.MouseDelta.x != 0.0f) {
    const double steps_per_px =
        (frame.x_last - frame.x_first) / std::max(1.0f, frame.max.x - frame.min.x);
    state.pan(-double(io.MouseDelta.x) * steps_per_px);
  }
}

void plot_series(const char* title, ImVec2 size, const std::vector<SeriesSpec>& series, bool log_y,
                 AppState& state, const SeriesHistory* skipped) {
  const double first = std::floor(state.view_first());
  const double last = std::ceil(state.view_last());
  PlotFrame frame = begin_plot(title, size, first, last + 1, log_y);
  const ColumnGrid grid(int64_t(first), int64_t(last), frame_columns(frame));
  std::vector<std::vector<Summary>> columns(series.size());
  std::vector<const std::vector<Summary>*> all;
  for (size_t i = 0; i < series.size(); ++i) {
    columns[i].resize(size_t(grid.columns()));
    series[i].history->summarize(grid, columns[i].data());
    all.push_back(&columns[i]);
  }
  // Abandoned spans: part of the y range, so the greyed trace a rewind left is not cut off.
  std::vector<std::vector<Summary>> abandoned;
  for (const SeriesSpec& spec : series) {
    for (const SeriesHistory* span : spec.abandoned) {
      abandoned.emplace_back(size_t(grid.columns()));
      span->summarize(grid, abandoned.back().data());
    }
  }
  for (const std::vector<Summary>& span : abandoned) all.push_back(&span);
  fit_y(frame, all);
  handle_plot_input(frame, state);

  ImDrawList* draw = ImGui::GetWindowDrawList();
  draw_axes(draw, frame, title);
  if (skipped) {
    std::vector<Summary> flags(size_t(grid.columns()));
    skipped->summarize(grid, flags.data());
    draw_flag_columns(draw, frame, flags, (kSkippedColour & 0x00FFFFFFu) | 0x90000000u);
  }
  for (const SeriesSpec& spec : series) {
    if (!spec.skipped) continue;
    std::vector<Summary> flags(size_t(grid.columns()));
    spec.skipped->summarize(grid, flags.data());
    draw_flag_columns(draw, frame, flags, (spec.colour & 0x00FFFFFFu) | 0x90000000u);
  }
  for (const std::vector<Summary>& span : abandoned) draw_series(draw, frame, span, kAbandonedColour);
  for (size_t i = 0; i < series.size(); ++i) {
    draw_series(draw, frame, columns[i], series[i].colour, bridge_columns(grid, series[i].sampled_every));
  }
  draw_cursors(draw, frame, state);

  // Legend at the top right, in the series' colours.
  float x = frame.max.x;
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  const char* legend_hovered = nullptr;   // the full name of the shortened entry under the mouse
  for (size_t i = series.size(); i-- > 0;) {
    const ImVec2 text_size = ImGui::CalcTextSize(series[i].label);
    x -= text_size.x + ImGui::GetFontSize() * 0.8f;
    const ImVec2 at(x, frame.min.y - ImGui::GetFontSize() * 1.2f);
    draw->AddText(at, series[i].colour, series[i].label);
    if (frame.hovered && series[i].full_label && mouse.x >= at.x && mouse.x < at.x + text_size.x && mouse.y >= at.y &&
        mouse.y < at.y + text_size.y) {
      legend_hovered = series[i].full_label;
    }
  }

  if (legend_hovered) {
    ImGui::SetTooltip("%s", legend_hovered);
  } else if (frame.hovered && state.cursor_step() >= 0) {
    const int64_t step = std::llround(frame.step_at(ImGui::GetIO().MousePos.x));
    const int column = grid.column_of(step);
    ImGui::BeginTooltip();
    ImGui::Text("step %lld", static_cast<long long>(step));
    for (size_t i = 0; i < series.size(); ++i) {
      float value = 0;
      if (series[i].history->value_at(step, &value)) {
        ImGui::Text("%s: %s", series[i].label, format_value(value).c_str());
      } else {
        // Older than the full-resolution window: say what the column holds.
        const Summary& c = columns[i][size_t(column)];
        if (!c.has_data()) {
          ImGui::Text("%s: no data", series[i].label);
          continue;
        }
        ImGui::Text("%s: %s .. %s%s", series[i].label, format_value(c.min).c_str(),
                    format_value(c.max).c_str(), c.has_nonfinite() ? " (non-finite)" : "");
      }
    }
    ImGui::EndTooltip();
  }
}

}  // namespace keel::app::ui
