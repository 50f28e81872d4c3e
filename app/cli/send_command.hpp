// `keel-cli send`: send one command to a probe and print its acknowledgement.
//
//   keel-cli send --endpoint tcp://127.0.0.1:5557 skip --count 2
//   keel-cli send --endpoint tcp://127.0.0.1:5557 dump --label before-lr-bump
//   keel-cli send --endpoint tcp://127.0.0.1:5557 policy skip_nonfinite off
//   keel-cli send --endpoint tcp://127.0.0.1:5557 describe
//
// What it is for: controlling a run from a shell or a script (PROTOCOL §6). --endpoint is the
// probe's telemetry (PUB) endpoint, the one `tail` uses; the command endpoint is its port + 1
// (keel::wire::command_endpoint_for), or given directly with --command-endpoint.
// Output: the ack as one JSON line (json_format.hpp: "type", "id", "ok", "step", "error", and
// for a dump "path" and "bytes").
// Exit status: 0 when the probe accepted the command, 1 when it refused it or the endpoint is
// invalid, 2 when no ack arrived within --timeout seconds (the command may still be applied
// later: it is never resent, because a skip must not be applied twice).
// Threads: main thread only.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "cli/command.hpp"
#include "net/client_auth.hpp"
#include "keel/wire/messages.hpp"

namespace keel::app {

struct SendOptions {
  std::string endpoint;          // telemetry endpoint; "" = keel::wire::kDefaultPubEndpoint
  std::string command_endpoint;  // overrides the one derived from `endpoint`
  double timeout_secs = 10;
  ClientAuthOptions auth;       // --server-key, --key, --no-auth (net/client_auth.hpp)
  keel::wire::Command command;   // kind and arguments; id is chosen by run_send when 0
};

// Sends options.command and waits for its ack; returns the exit status above.
int run_send(const SendOptions& options, std::ostream& out, std::ostream& err);

// Declares `send` with its `skip`, `dump`, `policy` and `describe` subcommands on `app`.
CliCommand add_send_command(CLI::App& app);

}  // namespace keel::app
