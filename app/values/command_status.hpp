// keel app CommandStatus: what became of one command the dashboard sent to a probe.
//
// What it is for: the CommandClient (net/) keeps one per command and the controls (ui/) show
// it; the main part (core/) carries each change from one to the other. A plain value.
// Threads: any; it is a value. Never: touches a socket.
#pragma once

#include <cstdint>
#include <string>

#include "keel/wire/messages.hpp"

namespace keel::app {

enum class CommandState {
  kPending,       // sent (or about to be), no answer yet
  kAcknowledged,  // the probe accepted it: ack.step says where it took effect
  kRefused,       // the probe refused it (ack.error), or it could not be sent (error)
  kTimedOut,      // no answer within the timeout; it may still be applied, it is not resent
};

const char* command_state_name(CommandState state);

struct CommandStatus {
  uint64_t id = 0;
  std::string command_endpoint;
  keel::wire::Command command;
  CommandState state = CommandState::kPending;
  keel::wire::Ack ack;         // the probe's answer, when one came
  std::string error;           // why it was refused or timed out, as a sentence; "" otherwise
  bool answered_late = false;  // the ack came after the command was shown as timed out
};

}  // namespace keel::app
