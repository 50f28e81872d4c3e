// CommandAuth: the keys a client presents to a probe whose command socket requires CURVE
// authentication (PROTOCOL §6, "Who may send commands").
//
// What it is for: keel-cli and the dashboard take the same two options, --server-key (the
// probe's public key, or a file holding it) and --key (this client's secret key file, from
// `keel-cli keygen`; its public key is derived and must be on the probe's allowed list).
// Threads: plain value. Never: prints the secret key.
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace keel::app {

struct CommandAuth {
  std::string server_key;   // Z85 public key of the probe; "" = no authentication
  std::string public_key;   // Z85, this client's
  std::string secret_key;   // Z85, this client's

  bool enabled() const { return !server_key.empty(); }

  // From the option values (each a Z85 key or a key file); both empty = no authentication.
  // Throws std::runtime_error with a sentence when only one is given or a key is invalid.
  static CommandAuth from_options(const std::string& server_key_option, const std::string& key_option);
};

// Declares --server-key and --key on `app`, storing the raw option values.
void add_command_auth_options(CLI::App& app, std::string& server_key_option, std::string& key_option);

}  // namespace keel::app
