// keel app ControlState: what the controls pane knows about the commands the user sent.
//
// What it is for: the plain-C++ half of the controls (control_panel.hpp draws): which command
// each control sent last and what became of it, the policies' states as far as the dashboard
// can tell, and a log of finished commands for the events pane. With --verbose every command
// is logged when sent ("keel: sent command skip id 3") and at each outcome ("keel: command skip
// id 3 acknowledged at step 812: ..."), like the selection log, so a user's terminal and a
// test see what the user's click led to.
// Policy state: the run description reports which policies are on (re-sent by the probe at
// once after a change and every few seconds); between two descriptions the user's
// acknowledged commands and the probe's `policy` events update it. A probe whose description
// does not report them leaves each "unknown" until an ack or an event says.
// Threads: the UI thread only.
// Never: touches a socket or ImGui.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "keel/wire/messages.hpp"
#include "keel/wire/vocabulary.hpp"
#include "values/command_status.hpp"

namespace keel::app::ui {

enum class PolicyState { kUnknown, kOn, kOff };

// One finished command, as the events pane lists it.
struct CommandEntry {
  uint64_t id = 0;
  std::string kind;          // the command's kind: "skip", "dump", "policy", ...
  CommandState state = CommandState::kPending;
  int64_t step = -1;         // where it took effect; -1 when it did not
  std::string text;          // status_text() of its final status
  std::string path;          // an acknowledged dump's path, as the probe sent it; "" otherwise
  int64_t stamp_unix_ns = 0; // when the dashboard learnt the outcome
};

// One line for a command's status: "pending", "acknowledged at step 812", "dump at step 90:
// /dumps/step-90 (12.3 MB)", "refused: ...", "timed out: ...".
std::string status_text(const CommandStatus& status);

class ControlState {
 public:
  static constexpr size_t kMaxLog = 200;

  // The user sent `command` (id `id` from the CommandClient) with the control `control`
  // ("skip", "dump", or "policy NAME").
  void submitted(const std::string& control, uint64_t id, const keel::wire::Command& command);
  // Applies a status read back from the CommandClient; a change is logged.
  void update(const CommandStatus& status);
  // Reads the probe's `policy` events (newest first, as RunModel keeps them); each is looked
  // at once.
  void note_events(const std::deque<keel::wire::Event>& events);
  // Reads the policies a run description reports (when it does); each description (by seq)
  // is looked at once, so an ack that arrives before the next one is not undone.
  void note_description(const keel::wire::RunDescription& description);

  // The shown run changed (another run, or the trainer restarted): its policies are unknown
  // again and its events are read from the start.
  void new_run();

  // The latest status of the command a control sent last, or nullptr.
  const CommandStatus* latest(const std::string& control) const;
  PolicyState policy(const std::string& name) const;
  // Finished commands, newest first.
  const std::deque<CommandEntry>& log() const { return log_; }

 private:
  std::map<std::string, uint64_t> last_by_control_;
  std::map<uint64_t, CommandStatus> statuses_;  // the latest command of each control
  std::map<std::string, PolicyState> policies_;
  std::deque<CommandEntry> log_;
  uint64_t events_seen_seq_ = 0;
  bool events_seen_any_ = false;
  uint64_t description_seen_seq_ = 0;
  bool description_seen_any_ = false;
};

}  // namespace keel::app::ui
