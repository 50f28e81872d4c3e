#include "net/command_auth.hpp"

#include <CLI/CLI.hpp>

#include <stdexcept>

#include "keel/wire/curve_keys.hpp"

namespace keel::app {

CommandAuth CommandAuth::from_options(const std::string& server_key_option, const std::string& key_option) {
  CommandAuth auth;
  if (server_key_option.empty() && key_option.empty()) return auth;
  if (server_key_option.empty() || key_option.empty()) {
    throw std::runtime_error("command authentication needs both --server-key (the probe's public key) and --key "
                             "(this client's secret key file)");
  }
  if (!keel::wire::curve_available()) {
    throw std::runtime_error("this libzmq has no CURVE support, so it cannot authenticate commands");
  }
  auth.server_key = keel::wire::read_curve_key(server_key_option);
  auth.secret_key = keel::wire::read_curve_key(key_option);
  auth.public_key = keel::wire::curve_public_key_of(auth.secret_key);
  if (auth.public_key.empty()) throw std::runtime_error("--key does not hold a valid CURVE secret key");
  return auth;
}

void add_command_auth_options(CLI::App& app, std::string& server_key_option, std::string& key_option) {
  app.add_option("--server-key", server_key_option,
                 "The probe's command public key (Z85 text or a .pub file), when it requires authentication")
      ->type_name("KEY|FILE");
  app.add_option("--key", key_option, "This client's secret key file (keel-cli keygen), when the probe requires "
                                      "authentication")
      ->type_name("FILE");
}

}  // namespace keel::app
