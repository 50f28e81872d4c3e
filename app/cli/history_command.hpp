// `keel-cli history`: print the steps a probe keeps in its ring (the late-attach backfill).
//
//   keel-cli history --endpoint tcp://127.0.0.1:5557 --count 100 --json
//
// What it is for: seeing what happened before a client attached (the last N steps the probe
// remembers, default its whole ring), from a shell, a script or a test. It first listens on
// the telemetry endpoint for the run description (the probe sends it to every new
// subscriber) so layers print by name, then sends the same `history` request the dashboard
// sends (PROTOCOL §6) to the command endpoint (port + 1, or --command-endpoint).
// Output: like `keel-cli tail`: the run description, then the step records oldest first, then
// every event the probe keeps (by default its last 1,024), as a table or (--json) one JSON object per
// line. --count N prints the newest N steps, and still every event: the one a user looks for,
// the run's first non-finite step, is most often older than they are. A one-line summary goes
// to stderr.
// Exit status: 0 when the probe answered, 1 when it refused or an endpoint is invalid, 2 when
// the probe fell silent for --timeout seconds before its ack.
// Threads: main thread only.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "cli/command.hpp"
#include "net/client_auth.hpp"

namespace keel::app {

// The largest history count (PROTOCOL §6): every step the probe keeps, and every event.
constexpr int64_t kWholeRing = int64_t{1} << 20;

struct HistoryOptions {
  std::string endpoint;          // telemetry endpoint; "" = keel::wire::kDefaultPubEndpoint
  std::string command_endpoint;  // overrides the one derived from `endpoint`
  int64_t count = kWholeRing;    // most recent steps printed, 1..kWholeRing
  double timeout_secs = 10;
  // How long to listen for the run description before printing without layer names.
  double describe_wait_secs = 2;
  bool json = false;
  ClientAuthOptions auth;       // --server-key, --key, --no-auth (net/client_auth.hpp)
};

int run_history(const HistoryOptions& options, std::ostream& out, std::ostream& err);

// Declares `history` and its options on `app`.
CliCommand add_history_command(CLI::App& app);

}  // namespace keel::app
