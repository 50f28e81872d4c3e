#include "ui/app_state.hpp"
#include "ui/verbose_log.hpp"

#include <algorithm>
#include <cstdio>
#include <utility>

namespace keel::app::ui {

std::optional<wire::LayerMetric> heat_metric_named(const std::string& name) {
  for (const wire::LayerMetric metric : wire::kHeatmapMetrics) {
    if (name == wire::info_of(metric).name) return metric;
  }
  return std::nullopt;
}

void AppState::show_rank(int32_t rank) {
  shown_run_key_.reset();
  last_shown_run_.reset();
  if (rank == shown_rank_) return;
  shown_rank_ = rank;
  verbose_log("keel: showing rank %d", rank);
}

void AppState::show_run(const wire::RunKey& key) {
  if (shown_run_key_ == key) return;
  shown_run_key_ = key;
  verbose_log("keel: showing run %s model %s rank %d", key.run_id.c_str(), key.model.c_str(), key.rank);
}

bool AppState::module_open(const std::string& path, bool default_open) const {
  const auto found = module_open_.find(path);
  return found == module_open_.end() ? default_open : found->second;
}

void AppState::set_module_open(const std::string& path, bool open) {
  const auto [at, added] = module_open_.emplace(path, open);
  if (!added && at->second == open) return;
  at->second = open;
  ++folds_version_;
  verbose_log("keel: module %s %s", path.c_str(), open ? "opened" : "folded");
}

void AppState::select(int layer, const std::string& layer_name, int64_t step) {
  selected_layer_ = layer;
  selected_layer_name_ = layer < 0 ? std::string() : layer_name;
  selected_step_ = step;
  if (step >= 0) {
    verbose_log("keel: selected layer %s step %lld", selected_layer_name_.c_str(),
                static_cast<long long>(step));
  } else {
    verbose_log("keel: selected layer %s", selected_layer_name_.c_str());
  }
}

void AppState::select_layer(int layer, const std::string& layer_name) {
  select(layer, layer_name, selected_step_);
}

void AppState::begin_frame(int64_t first_step, int64_t latest_step) {
  cursor_step_ = next_cursor_step_;
  next_cursor_step_ = -1;
  scroll_now_ = scroll_requested_;
  scroll_requested_ = false;
  first_step_ = first_step;
  latest_step_ = latest_step;
  if (follow_live_) view_last_ = std::max<double>(double(latest_step), span_steps_ + first_step);
  clamp_view();
  // Only once the steps are there: an event can arrive before the records of its step (a late
  // attach's backfill), and a view placed then would be left behind by following live.
  if (reveal_pending_ >= 0 && latest_step >= reveal_pending_) {
    const int64_t step = std::exchange(reveal_pending_, -1);
    // In view already (a live NaN a moment ago): the view stays, following live if it was.
    const bool in_view = double(step) >= view_first() && double(step) <= view_last() && step >= first_step;
    if (!in_view) {
      follow_live_ = false;
      // Centred, but never past the first step held: a step older than the history kept shows
      // the oldest span held, not a few steps at the edge of an empty plot.
      view_last_ = std::max(double(step) + span_steps_ * 0.5, double(first_step) + span_steps_);
      clamp_view();
    }
    step_before_history_ = step < first_step ? step : -1;
  }
}

void AppState::reveal_step(int64_t step) {
  if (step >= 0) reveal_pending_ = step;
}

void AppState::set_follow_live(bool follow) {
  step_before_history_ = -1;
  follow_live_ = follow;
  if (follow_live_) view_last_ = double(latest_step_);
  clamp_view();
}

void AppState::zoom(double factor, double anchor_step) {
  step_before_history_ = -1;
  const double old_span = span_steps_;
  span_steps_ = std::clamp(span_steps_ * factor, kMinSpanSteps, kMaxSpanSteps);
  // Keep the anchor at the same place on screen.
  const double anchor_frac = old_span > 0 ? (view_last_ - anchor_step) / old_span : 0.0;
  view_last_ = anchor_step + anchor_frac * span_steps_;
  if (view_last_ < double(latest_step_) - 0.5) follow_live_ = false;
  clamp_view();
}

void AppState::pan(double delta_steps) {
  step_before_history_ = -1;
  view_last_ += delta_steps;
  if (delta_steps < 0 && view_last_ < double(latest_step_) - 0.5) follow_live_ = false;
  if (view_last_ >= double(latest_step_)) follow_live_ = true;
  clamp_view();
}

void AppState::show_steps(double first, double last) {
  step_before_history_ = -1;
  span_steps_ = std::clamp(last - first, kMinSpanSteps, kMaxSpanSteps);
  view_last_ = std::max(last, first + span_steps_);
  follow_live_ = view_last_ >= double(latest_step_);
  clamp_view();
}

void AppState::reset_view() {
  span_steps_ = kDefaultSpanSteps;
  set_follow_live(true);
}

void AppState::clamp_view() {
  // Never scroll past the newest step, nor so far back that nothing recorded is visible.
  const double latest = std::max<double>(double(latest_step_), double(first_step_) + span_steps_);
  view_last_ = std::clamp(view_last_, double(first_step_) + kMinSpanSteps, latest);
  if (follow_live_) view_last_ = latest;
}

}  // namespace keel::app::ui
