// keel app controls: Skip next update, Dump checkpoint, Rewind, and the policy toggles (DESIGN §4).
//
// What it is for: acting on the run from the dashboard. One row under the status bar: the
// Skip button, the Dump button (which asks for confirmation and an optional label first), the
// Rewind button (which asks for confirmation and the step to go back to first; disabled while
// the run's newest record says it keeps no snapshots, docs/rewind.md), and
// a checkbox per policy (skip_nonfinite, skip_spike, dump_nonfinite) showing the state the user
// set or the probe reported, mixed ("unknown", on hover) until then. What became of the
// command sent last (pending, acknowledged with its step, the dump's path and size with a
// button that copies the path, the refusal or the timeout) shows at the row's end, after every
// control, so that no button moves when it appears; finished commands also go to the events
// pane (commands() feeds draw_events). With --verbose every click is logged ("keel: clicked Skip next
// update"), like the selection log, and so is where each button is ("keel: control skip x0 ...
// y1 ...", and "keel: control copy ..." for the copy button) when it first shows or moves, for
// scripted clicks.
// Commands go to the command socket beside the shown run's endpoint (port + 1): when several
// endpoints (ranks) are connected, to the one whose telemetry carries the shown run's rank,
// addressed to that rank so that a probe of another rank refuses rather than acts. Skip and
// Rewind are the exceptions: with several ranks they go to every rank, naming one step ahead
// (at_step) so that all replicas skip (or rewind at) the same step (command_targets.hpp); a rank
// that refuses shows beside the button.
// A click posts a CommandIntent (take_intents()); the main part (core/AppCore) sends it and
// reports, in the next frames' FrameInput, the id it went out with and what became of it.
// Threads: the UI thread, inside an ImGui window.
// Never: touches a socket or waits on the network.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "model/model.hpp"
#include "model/run_model.hpp"
#include "ui/control_state.hpp"
#include "values/command_intent.hpp"
#include "values/frame_input.hpp"

namespace keel::app::ui {

class ControlPanel {
 public:
  // One row of controls for `run` (nullptr: nothing to control yet, the buttons are disabled).
  // First takes in what `input` says of the commands sent earlier.
  void draw(const Model& model, const RunModel* run, const FrameInput& input);

  // The commands clicked since the last call, oldest first.
  std::vector<CommandIntent> take_intents() { return std::exchange(intents_, {}); }

  // Finished commands for the events pane, newest first.
  const std::deque<CommandEntry>& commands() const { return state_.log(); }

 private:
  void send(const std::string& control, keel::wire::Command command,
            const std::vector<EndpointState>& links, const RunModel& run);
  void post(const std::string& control, keel::wire::Command command, const std::string& endpoint);
  // Skip and rewind: the shown rank alone, or every rank at one step when several are
  // connected. `control` names the shown rank's ("skip"), "<control> rank N" the others'.
  void send_every_rank(const std::string& control, keel::wire::Command command, const Model& model,
                       const std::vector<EndpointState>& links, const RunModel& run);
  // The Rewind button: disabled, saying why, while the run keeps no snapshots.
  void draw_rewind_button(const RunModel* run);
  void draw_rewind_popup(const Model& model, const std::vector<EndpointState>& links, const RunModel& run);
  void read_outcomes(const FrameInput& input);
  void draw_dump_popup(const std::vector<EndpointState>& links, const RunModel& run);
  // The status of the command sent last, at the row's end.
  void draw_status();

  // The other ranks of the last skip or rewind sent to every rank, and their controls ("skip rank N").
  std::vector<std::pair<int32_t, std::string>> other_ranks_;
  std::vector<CommandIntent> intents_;
  std::string last_control_;   // the control that sent the command shown at the row's end
  ControlState state_;
  const RunModel* run_seen_ = nullptr;
  bool open_dump_popup_ = false;
  std::array<char, 128> dump_label_{};
  bool open_rewind_popup_ = false;
  std::array<char, 32> rewind_step_{};   // "" for the newest snapshot
  std::string rewind_error_;             // why the step typed is not one
  // Button rectangles last logged (see log_geometry in the .cpp).
  std::array<float, 4> skip_rect_{};
  std::array<float, 4> dump_rect_{};
  std::array<float, 4> rewind_rect_{};
  std::array<float, 4> confirm_rect_{};   // the Rewind button of its confirmation
  std::array<float, 4> copy_rect_{};
};

}  // namespace keel::app::ui
