// send_request: opens a command socket to a probe (with CURVE keys when given) and queues one
// command, for the keel-cli subcommands that talk to the command socket (send, history).
// Threads: main thread only. Never: throws; a failure is printed to `err` and returns null.
#pragma once

#include <memory>
#include <ostream>
#include <string>

#include "keel/wire/messages.hpp"
#include "net/client_auth.hpp"
#include "net/command_socket.hpp"

namespace keel::app {

// `auth`: the raw --server-key, --key and --no-auth values (net/client_auth.hpp).
std::unique_ptr<CommandSocket> send_request(const std::string& command_endpoint, const ClientAuthOptions& auth,
                                            const keel::wire::Command& command, std::ostream& err);

}  // namespace keel::app
