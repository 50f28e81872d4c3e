// How a test's stand-in for a probe authenticates its socket: not at all, or as a probe given
// no keys does (a CURVE server with the user's own key pair, which keel-cli and the dashboard
// present by default; PROTOCOL §6).
#pragma once

#include <zmq.hpp>

#include "keel/wire/user_keys.hpp"

namespace keel::app::test_support {

enum class ServerAuth { kNone, kUsersOwnKey };

// Before bind().
inline void serve_with(zmq::socket_t& socket, ServerAuth auth) {
  if (auth != ServerAuth::kUsersOwnKey) return;
  socket.set(zmq::sockopt::curve_server, 1);
  socket.set(zmq::sockopt::curve_secretkey, keel::wire::user_key_pair().secret_key);
}

}  // namespace keel::app::test_support
