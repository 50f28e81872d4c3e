// CommandAuth: the keys a client presents to a probe whose command socket requires CURVE
// authentication (PROTOCOL §6, "Who may send commands").
//
// What it is for: keel-cli and the dashboard take the same options. With none, they present the
// user's own key pair (keel/wire/user_keys.hpp), which is what a probe given no keys accepts:
// the owner of a run steers it with no flag. --server-key (the probe's public key, or a file
// holding it) and --key (this client's secret key file, from `keel-cli keygen`; its public key
// must be on the probe's allowed list) name other keys, for the remote set-up. --no-auth
// sends commands unauthenticated, to a probe that allows that (allow_unauthenticated_local).
// Threads: plain value. Never: prints the secret key.
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace keel::app {

// The raw option values: --server-key, --key, --no-auth.
struct CommandAuthOptions {
  std::string server_key;
  std::string key;
  bool no_auth = false;
};

struct CommandAuth {
  std::string server_key;   // Z85 public key of the probe; "" = no authentication
  std::string public_key;   // Z85, this client's
  std::string secret_key;   // Z85, this client's

  bool enabled() const { return !server_key.empty(); }

  // Whether the keys are the user's own, taken by default (no option given).
  bool users_own = false;

  // From the option values (each a Z85 key or a key file); neither given: the user's own key
  // pair; no_auth: no authentication. Throws std::runtime_error with a sentence when only one
  // key is given, a key is invalid, or the user's key is not usable (its file open to others).
  static CommandAuth from_options(const CommandAuthOptions& options);
};

// Declares --server-key, --key and --no-auth on `app`, storing the raw option values.
void add_command_auth_options(CLI::App& app, CommandAuthOptions& options);

}  // namespace keel::app
