// A test's raw command client presents the user's own key, as keel-cli and the dashboard do by
// default: a probe given no keys accepts only that (keel/wire/user_keys.hpp), so the tests go
// the secure path a user goes.
#pragma once

#include <zmq.hpp>

#include "keel/wire/user_keys.hpp"

namespace keel::test {

// Before connect(): `socket` becomes a CURVE client of the user's probes.
inline void present_users_key(zmq::socket_t& socket) {
  const keel::wire::CurveKeyPair own = keel::wire::user_key_pair();
  socket.set(zmq::sockopt::curve_serverkey, own.public_key);
  socket.set(zmq::sockopt::curve_publickey, own.public_key);
  socket.set(zmq::sockopt::curve_secretkey, own.secret_key);
}

}  // namespace keel::test
