// keel app Dashboard: the one window's layout and keyboard, composing every view.
//
// What it is for: placing the panes (status bar and controls on top, then the newest warning's
// banner while there is one; global charts, heatmap and layer detail on the left, the run scrubber under the charts; layer list and events on the right) with
// draggable splitters between them,
// choosing which run the panes show (a rank's, when several are connected: until the user
// picks one, the rank that went non-finite first), and the keys: up/down move the layer
// selection (in the list's order), space toggles follow-live, Home resets the view, F goes to
// the first non-finite (its rank, layer and step, in every view), Ctrl+O the Open dialog.
// Files chosen there or dropped on the window become open requests for the main part.
// Threads: the UI thread, between Window::begin_frame() and Window::render().
// Never: touches a socket or changes the model. It reads the model and the FrameInput the main
// part (core/AppCore) hands it, and its controls post CommandIntents for the main part to send.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/model.hpp"
#include "ui/app_state.hpp"
#include "ui/control_panel.hpp"
#include "ui/heatmap_view.hpp"
#include "ui/instability_focus.hpp"
#include "ui/layer_detail.hpp"
#include "ui/ranks_view.hpp"
#include "ui/run_picker.hpp"
#include "ui/run_scrubber.hpp"
#include "ui/layer_list.hpp"
#include "ui/open_dialog.hpp"
#include "ui/warning_banner.hpp"
#include "values/command_intent.hpp"
#include "values/frame_input.hpp"

namespace keel::app::ui {

class Dashboard {
 public:
  // Selects the layer called `name` as soon as a run describes it (the --select option).
  void request_select(const std::string& name) { pending_select_ = name; }

  void draw(const Model& model, const FrameInput& input);
  // The commands the controls asked for since the last call, oldest first (the main part sends
  // them and reports their ids in the next FrameInput).
  std::vector<CommandIntent> take_intents() { return controls_.take_intents(); }

  // The files the user asked to open since the last call, oldest first: chosen in the Open
  // dialog (the "Open..." button, Ctrl+O) or dropped on the window. The main part opens them
  // (views never open files); each is logged ("keel: open requested PATH").
  std::vector<std::string> take_open_requests() { return std::exchange(open_requests_, {}); }

  // Shows this rank's run (the --rank option); the ranks view's clicks change it later.
  void request_rank(int32_t rank) { state_.show_rank(rank); }
  // Starts the heatmap and the ranks strip on this metric (the --heat-metric option); the
  // heatmap's radio buttons change it later.
  void request_heat_metric(wire::LayerMetric metric) { state_.heat_metric = metric; }

  // The run the panes show: the current run of `rank`; for rank -1 (or before that rank has
  // sent anything) the current run of the rank that went non-finite first
  // (first_nonfinite_rank), else of the lowest rank; nullptr before any data.
  static const RunModel* shown_run(const Model& model, int32_t rank = -1);
  // The same for what `state` shows: the run it names by identity while the model holds it,
  // else its rank's. When that rank has several current runs (a probe per model), the run
  // shown is pinned in `state`, so a description of the other one does not switch the panes.
  static const RunModel* shown_run(const Model& model, AppState& state);
  const AppState& state() const { return state_; }

 private:
  void handle_keys(const Model& model, const RunModel& run);
  // --verbose: which run the panes show ("keel: shown LABEL: layers N first .. loss L"), when that changes.
  void log_shown_run(const RunModel& run);
  // Prints events not printed yet ("keel: event KIND step N layer NAME run LABEL: DETAIL"),
  // oldest first, so the terminal (and a test) has a record of what the events pane showed.
  void log_new_events(const RunModel& run);
  // Prints each endpoint's new late-attach outcome ("keel: backfill ENDPOINT: backfilled ...").
  void log_backfills(const std::vector<EndpointState>& links);
  // Always, to stderr: a probe that refuses this client's keys is why nothing arrives.
  void log_refusals(const std::vector<EndpointState>& links);
  // Once each opened file is read: to stderr when it could not be (with why), and to the
  // verbose log what it held and which steps the shown run then spans.
  void log_recordings(const std::vector<RecordingState>& recordings, const RunModel* run);
  void log_refused_messages(const Model& model);
  void draw_panes(const Model& model, const RunModel& run);
  void request_open(std::string path);

  AppState state_;
  InstabilityFocus focus_;
  HeatmapView heatmap_;
  RanksView ranks_;
  ControlPanel controls_;
  LayerList layer_list_;
  LayerDetail layer_detail_;
  std::string pending_select_;
  RunPicker run_picker_;
  RunScrubber scrubber_;
  OpenDialog open_dialog_;
  WarningBanner warning_banner_;
  std::vector<std::string> open_requests_;
  std::string logged_shown_;   // the shown run's identity as last printed (log_shown_run)
  size_t logged_recordings_ = 0;   // opened files whose end was logged (they end in order)
  uint64_t logged_refused_messages_ = 0;   // Model's refused_insane when last logged
  std::chrono::steady_clock::time_point refused_logged_at_;
  const RunModel* logged_run_ = nullptr;
  uint64_t logged_event_seq_ = 0;
  bool logged_any_event_ = false;
  // Late-attach outcomes already printed, per endpoint (EndpointState::backfill_outcomes).
  std::vector<uint64_t> logged_backfills_;
  std::vector<std::string> logged_refusals_;
  // Pane sizes as fractions of the window, changed by dragging the splitters.
  float left_frac_ = 0.64f;
  float charts_frac_ = 0.3f;
  float heatmap_frac_ = 0.42f;
  float list_frac_ = 0.62f;
};

}  // namespace keel::app::ui
