// keel app AppState: what the user is looking at, shared by every view.
//
// What it is for: one place for the selection (layer, step), the shared step cursor, the
// visible step range of all step-indexed plots (global charts, heatmap, layer detail),
// "follow live" and going to a step (reveal_step), the steps every plot marks (the run's first non-finite, its newest warning), the rank shown
// when several are connected, and which modules of the layer tree are open. Views read it and
// change it through these functions, so clicking a heatmap cell, an event or a list row all
// select the same way, and every selection is logged ("keel: selected layer NAME step N", with
// --verbose, verbose_log.hpp).
// Threads: the UI thread only.
// Never: touches the model, ImGui or a socket; it is plain state plus the selection log.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include "keel/wire/messages.hpp"
#include "keel/wire/run_key.hpp"

namespace keel::app::ui {

// The heatmap's metric (one of wire::kHeatmapMetrics) whose wire name (snake case, as in JSON:
// "update_ratio") is `name`; nullopt for any other name (the --heat-metric option).
std::optional<wire::LayerMetric> heat_metric_named(const std::string& name);

class AppState {
 public:
  // Default width of the visible window when following live, in steps.
  static constexpr double kDefaultSpanSteps = 400.0;
  static constexpr double kMinSpanSteps = 8.0;
  // Far beyond any run's length: zooming out is limited by the run, not by this.
  static constexpr double kMaxSpanSteps = 1e9;

  // Selection. `layer` is an index in model order of the current run (-1: none).
  void select(int layer, const std::string& layer_name, int64_t step);
  void select_layer(int layer, const std::string& layer_name);
  int selected_layer() const { return selected_layer_; }
  const std::string& selected_layer_name() const { return selected_layer_name_; }
  int64_t selected_step() const { return selected_step_; }
  // Keeps the selection valid when the run's layer table changes (attach mid-run, restart):
  // finds the selected name again, or clears the selection.
  template <typename FindIndex>
  void revalidate(FindIndex&& find_index) {
    if (selected_layer_name_.empty()) return;
    selected_layer_ = find_index(selected_layer_name_);
    if (selected_layer_ < 0) selected_layer_name_.clear();
  }

  // A selection made for the user (the first non-finite): the views that scroll bring the
  // selected layer into view in the next frame, once.
  void request_scroll_to_selection() { scroll_requested_ = true; }
  bool scroll_to_selection() const { return scroll_now_; }

  // The step every step plot marks, the run's first non-finite one (-1: none).
  int64_t marked_step() const { return marked_step_; }
  void set_marked_step(int64_t step) { marked_step_ = step; }
  // The step of the run's newest warning (RunModel::newest_warning), marked on every step plot
  // in the warning's own colour (-1: none).
  int64_t warning_step() const { return warning_step_; }
  void set_warning_step(int64_t step) { warning_step_ = step; }

  // Shared step cursor: the step under the mouse in any step plot this frame (-1: none).
  int64_t cursor_step() const { return cursor_step_; }
  void set_cursor_step(int64_t step) { next_cursor_step_ = step; }
  // Called once per frame before drawing: last frame's hover becomes this frame's cursor.
  void begin_frame(int64_t first_step, int64_t latest_step);

  // Visible step range [view_first(), view_last()] for every step-indexed plot.
  double view_first() const { return view_last_ - span_steps_; }
  double view_last() const { return view_last_; }
  bool follow_live() const { return follow_live_; }
  void set_follow_live(bool follow);
  void toggle_follow_live() { set_follow_live(!follow_live_); }
  // Zooms by `factor` (< 1 zooms in) around `anchor_step`; leaves follow-live when the right
  // edge no longer shows the newest step.
  void zoom(double factor, double anchor_step);
  // Pans by `delta_steps` (negative: into the past); leaves follow-live when panning back.
  void pan(double delta_steps);
  // Shows steps [first, last] (the run scrubber's drags, "whole run"): the span is kept
  // within [kMinSpanSteps, kMaxSpanSteps]; follows live when `last` reaches the newest step,
  // as pan() does, and leaves it otherwise.
  void show_steps(double first, double last);
  // Home: back to the default span, following live.
  void reset_view();
  // Brings `step` into view (an event clicked, the first non-finite, the F key): a step
  // already in view leaves the view as it is; any other is centred at the first begin_frame()
  // whose newest step has reached it, leaving follow-live. A step older than the history kept shows the oldest steps kept, and
  // step_before_history() says so until the view moves elsewhere.
  void reveal_step(int64_t step);
  // The step reveal_step() was asked for when it is older than the first step kept (-1: none).
  int64_t step_before_history() const { return step_before_history_; }

  // The per-layer metric the heatmap and the ranks strip show: one of wire::kHeatmapMetrics.
  wire::LayerMetric heat_metric = wire::LayerMetric::kGradNorm;

  // Which modules of the layer tree are open, by module path (model/module_tree.hpp), shared by
  // the layer list and the heatmap: opening a module in either shows its rows in both. A module
  // the user has neither opened nor folded is `default_open` (ui/module_rows.hpp's rule).
  // Changes are logged ("keel: module PATH opened" / "folded").
  bool module_open(const std::string& path, bool default_open) const;
  void set_module_open(const std::string& path, bool open);
  // Counts the changes set_module_open() made: what views cache their rows by.
  uint64_t folds_version() const { return folds_version_; }

  // The rank whose run the panes show; -1 (the default) shows the lowest rank that has sent
  // telemetry. Logged ("keel: showing rank N") like a selection. Showing a rank forgets the
  // run shown by identity.
  int32_t shown_rank() const { return shown_rank_; }
  void show_rank(int32_t rank);
  // The run the panes show by identity, when several runs share a rank (a probe per model of
  // one job): picked by the user (show_run, logged "keel: showing run ...") or pinned by the
  // dashboard to the one it showed first (pin_run), so the panes never switch between them on
  // their own. Empty: the shown rank's current run.
  const std::optional<wire::RunKey>& shown_run_key() const { return shown_run_key_; }
  void show_run(const wire::RunKey& key);
  void pin_run(const wire::RunKey& key) { shown_run_key_ = key; }
  // The run the panes showed last (set by the dashboard each frame; forgotten with
  // show_rank): when a second run joins its rank, the one the user was looking at is the one
  // pinned, not whichever the rank's newest description made current.
  const std::optional<wire::RunKey>& last_shown_run() const { return last_shown_run_; }
  void remember_shown_run(const wire::RunKey& key) { last_shown_run_ = key; }

 private:
  void clamp_view();

  int32_t shown_rank_ = -1;
  std::optional<wire::RunKey> shown_run_key_;
  std::optional<wire::RunKey> last_shown_run_;
  int selected_layer_ = -1;
  std::string selected_layer_name_;
  int64_t selected_step_ = -1;
  int64_t cursor_step_ = -1;
  int64_t next_cursor_step_ = -1;
  int64_t marked_step_ = -1;
  int64_t warning_step_ = -1;
  bool scroll_requested_ = false;
  bool scroll_now_ = false;
  bool follow_live_ = true;
  double span_steps_ = kDefaultSpanSteps;
  double view_last_ = kDefaultSpanSteps;
  int64_t first_step_ = 0;
  int64_t latest_step_ = 0;
  int64_t reveal_pending_ = -1;       // applied at the next begin_frame()
  int64_t step_before_history_ = -1;
  std::unordered_map<std::string, bool> module_open_;
  uint64_t folds_version_ = 0;
};

}  // namespace keel::app::ui
