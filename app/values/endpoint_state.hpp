// keel app EndpointState: how one telemetry endpoint is doing, as the Receiver reports it.
//
// What it is for: the status bar, the late-attach log and the command targets read it; the
// Receiver (net/) fills it. A plain value, copied once a frame by the main part (core/).
// Threads: any; it is a value. Never: touches a socket.
#pragma once

#include <cstdint>
#include <string>

namespace keel::app {

enum class LinkState {
  kConnecting,        // nothing decoded yet from this endpoint
  kLive,              // a message arrived within the stale threshold
  kStale,             // messages arrived once, but none for a while (trainer stopped or paused)
  kProtocolMismatch,  // the only recent traffic was rejected as another protocol version
  kRefused,           // the probe refused this client's keys (another user's run); `refusal` says why
};

const char* link_state_name(LinkState state);

struct EndpointState {
  std::string endpoint;
  LinkState state = LinkState::kConnecting;
  uint64_t messages = 0;
  uint64_t decode_errors = 0;
  std::string last_error;          // the most recent decode error, "" if none
  std::string refusal;             // why the probe refused the handshake (HandshakeWatch), "" if it did not
  double secs_since_message = -1;  // -1 before the first message
  std::string backfill;            // the latest late-attach outcome (net/backfill.hpp), "" before one
  uint64_t backfill_outcomes = 0;  // increments with each outcome
  int32_t rank = -1;               // the rank its telemetry carries (one probe per endpoint); -1 before any
};

}  // namespace keel::app
