#include "values/command_status.hpp"

namespace keel::app {

const char* command_state_name(CommandState state) {
  switch (state) {
    case CommandState::kPending: return "pending";
    case CommandState::kAcknowledged: return "acknowledged";
    case CommandState::kRefused: return "refused";
    case CommandState::kTimedOut: return "timed out";
  }
  return "?";
}

}  // namespace keel::app
