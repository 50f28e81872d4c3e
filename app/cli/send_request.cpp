#include "cli/send_request.hpp"

#include <exception>

#include "net/client_auth.hpp"

namespace keel::app {

std::unique_ptr<CommandSocket> send_request(const std::string& command_endpoint, const ClientAuthOptions& auth,
                                            const keel::wire::Command& command, std::ostream& err) {
  std::unique_ptr<CommandSocket> socket;
  try {
    socket = std::make_unique<CommandSocket>(command_endpoint, ClientAuth::from_options(auth));
  } catch (const std::exception& failure) {
    err << "keel-cli: " << failure.what() << '\n';
    return nullptr;
  }
  // connect() has already made the pipe, so this queues even before the probe is reachable.
  std::string error;
  if (!socket->send(command, error)) {
    err << "keel-cli: " << error << '\n';
    return nullptr;
  }
  return socket;
}

}  // namespace keel::app
