#include "values/endpoint_state.hpp"

namespace keel::app {

const char* link_state_name(LinkState state) {
  switch (state) {
    case LinkState::kConnecting: return "connecting";
    case LinkState::kLive: return "live";
    case LinkState::kStale: return "stale";
    case LinkState::kProtocolMismatch: return "protocol mismatch";
    case LinkState::kRefused: return "refused";
  }
  return "?";
}

}  // namespace keel::app
