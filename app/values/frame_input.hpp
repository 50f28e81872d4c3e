// keel app FrameInput: what the main part hands the views at the start of each frame.
//
// What it is for: the views read the network's state without owning or touching any of it.
// The main part (core/AppCore) fills one FrameInput per frame from the Receiver and the
// CommandClient; the Dashboard reads it while it draws.
// Threads: the UI thread. Never: touches a socket.
#pragma once

#include <cstdint>
#include <vector>

#include "values/command_intent.hpp"
#include "values/command_status.hpp"
#include "values/endpoint_state.hpp"
#include "values/recording_state.hpp"

namespace keel::app {

struct FrameInput {
  std::vector<EndpointState> links;  // one per endpoint, in the order given on the command line
  uint64_t queue_dropped = 0;        // messages the UI fell too far behind to take (Receiver)
  // Intents carried out since the last frame, in the order they were posted; each comes before
  // any status of its id.
  std::vector<SentCommand> sent;
  // Statuses that changed since the last frame (pending -> acknowledged, a late ack, ...).
  std::vector<CommandStatus> command_updates;
  // Files opened with --open, in the order given, and how far each has been read.
  std::vector<RecordingState> recordings;
};

}  // namespace keel::app
