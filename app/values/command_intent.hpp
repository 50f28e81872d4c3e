// keel app CommandIntent: a command a view asks for, and the id it went out with.
//
// What it is for: views own no socket. A control posts a CommandIntent into the Dashboard's
// queue; the main part (core/AppCore) takes the queue after the frame, submits each intent to
// its CommandClient and tells the views, in the next FrameInput, which id each one got
// (SentCommand). The command path reads one way: view -> intent -> main part -> net.
// Threads: any; these are values. Never: touch a socket.
#pragma once

#include <cstdint>
#include <string>

#include "keel/wire/messages.hpp"

namespace keel::app {

struct CommandIntent {
  // The control that asked ("skip", "skip rank 2", "dump", "policy skip_nonfinite"): the
  // controls show each one's latest command beside it.
  std::string control;
  // The telemetry endpoint of the probe it is for; the command goes to the command socket
  // beside it (keel::wire::command_endpoint_for).
  std::string endpoint;
  keel::wire::Command command;
};

struct SentCommand {
  std::string control;
  uint64_t id = 0;              // chosen by the CommandClient; command.id holds it too
  keel::wire::Command command;
};

}  // namespace keel::app
