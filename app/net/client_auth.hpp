// ClientAuth: the keys a client presents to a probe whose command and telemetry sockets
// require CURVE authentication (PROTOCOL §6, "Who may read and steer a run").
//
// What it is for: keel-cli and the dashboard take the same options. With none, they present the
// user's own key pair (keel/wire/user_keys.hpp), which is what a probe given no keys accepts:
// the owner of a run steers it with no flag. --server-key (the probe's public key, or a file
// holding it) and --key (this client's secret key file, from `keel-cli keygen`; its public key
// must be on the probe's allowed list) name other keys, for the remote set-up. --no-auth
// connects without keys, to a probe that allows that (allow_unauthenticated_local).
// Threads: plain value. Never: prints the secret key.
#pragma once

#include <string>

#include <zmq.hpp>

namespace CLI {
class App;
}

namespace keel::app {

// The raw option values: --server-key, --key, --no-auth.
struct ClientAuthOptions {
  std::string server_key;
  std::string key;
  bool no_auth = false;
};

struct ClientAuth {
  std::string server_key;   // Z85 public key of the probe; "" = no authentication
  std::string public_key;   // Z85, this client's
  std::string secret_key;   // Z85, this client's

  bool enabled() const { return !server_key.empty(); }

  // Whether the keys are the user's own, taken by default (no option given).
  bool users_own = false;

  // From the option values (each a Z85 key or a key file); neither given: the user's own key
  // pair; no_auth: no authentication. Throws std::runtime_error with a sentence when only one
  // key is given, a key is invalid, or the user's key is not usable (its file open to others).
  static ClientAuth from_options(const ClientAuthOptions& options);
};

// Before `socket` connects: it becomes a CURVE client presenting `auth` (nothing when disabled).
// Returns it, so a constructor can present the keys before it watches the socket.
zmq::socket_t& present_keys(zmq::socket_t& socket, const ClientAuth& auth);

// Declares --server-key, --key and --no-auth on `app`, storing the raw option values.
void add_client_auth_options(CLI::App& app, ClientAuthOptions& options);

}  // namespace keel::app
