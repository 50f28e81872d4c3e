#include "net/client_auth.hpp"

#include <CLI/CLI.hpp>

#include <stdexcept>

#include "keel/wire/curve_keys.hpp"
#include "keel/wire/user_keys.hpp"

namespace keel::app {

ClientAuth ClientAuth::from_options(const ClientAuthOptions& options) {
  const std::string& server_key_option = options.server_key;
  const std::string& key_option = options.key;
  ClientAuth auth;
  if (options.no_auth) {
    if (!server_key_option.empty() || !key_option.empty()) {
      throw std::runtime_error("--no-auth connects without keys: leave out --server-key and --key");
    }
    return auth;
  }
  if (server_key_option.empty() && key_option.empty()) {
    // The same user's probe serves and accepts this very pair (ProbeOptions::command_secret_key).
    const keel::wire::CurveKeyPair own = keel::wire::user_key_pair();
    auth.server_key = own.public_key;
    auth.public_key = own.public_key;
    auth.secret_key = own.secret_key;
    auth.users_own = true;
    return auth;
  }
  if (server_key_option.empty() || key_option.empty()) {
    throw std::runtime_error("authentication needs both --server-key (the probe's public key) and --key "
                             "(this client's secret key file)");
  }
  if (!keel::wire::curve_available()) {
    throw std::runtime_error("this libzmq has no CURVE support, so it cannot authenticate to a probe");
  }
  auth.server_key = keel::wire::read_curve_key(server_key_option);
  auth.secret_key = keel::wire::read_curve_key(key_option);
  auth.public_key = keel::wire::curve_public_key_of(auth.secret_key);
  if (auth.public_key.empty()) throw std::runtime_error("--key does not hold a valid CURVE secret key");
  return auth;
}

zmq::socket_t& present_keys(zmq::socket_t& socket, const ClientAuth& auth) {
  if (auth.enabled()) {
    socket.set(zmq::sockopt::curve_serverkey, auth.server_key);
    socket.set(zmq::sockopt::curve_publickey, auth.public_key);
    socket.set(zmq::sockopt::curve_secretkey, auth.secret_key);
  }
  return socket;
}

void add_client_auth_options(CLI::App& app, ClientAuthOptions& options) {
  app.add_option("--server-key", options.server_key,
                 "The probe's public key (Z85 text or a .pub file), when it was given keys of its own "
                 "(default: your own key, ~/.keel/user.key, as the probe uses by default)")
      ->type_name("KEY|FILE");
  app.add_option("--key", options.key, "This client's secret key file (keel-cli keygen), with --server-key "
                                       "(default: your own key)")
      ->type_name("FILE");
  app.add_flag("--no-auth", options.no_auth,
               "Connect without keys, to a probe that allows it (ProbeOptions::allow_unauthenticated_local)");
}

}  // namespace keel::app
