// `keel-cli watch`: wakes someone when a run needs them.
//
//   keel-cli watch --endpoint tcp://127.0.0.1:5557 --alert-command 'cat >> ~/keel-alerts.jsonl'
//
// What it is for: a run left overnight. It listens as `keel-cli tail` does (cli/received_
// telemetry.hpp: one or more probes, the user's keys, the probe's history first, so a watcher
// started after the trouble still hears of it) and alerts (app/alert) on a `warning`, a
// `first_nonfinite`, a `rewind`, a `rewind_stopped`, and a rank that sent steps and then went
// silent for --silent-after seconds ("silent", the watcher's own kind). Each alert is one line
// on stdout; with --alert-command it runs the command through /bin/sh -c with the alert as one
// JSON object on its standard input (app/alert/alert_json.hpp), and with --notify it shows a
// desktop notification. At most one alert per kind and rank every --alert-interval seconds;
// the next says how many were held back. A command that fails, is not found or hangs (killed
// after --alert-timeout) is said on stderr with its exit status, and the watcher goes on.
// stderr also says what the watcher listens for, each rank as it is first heard (and heard
// again after a silence), the links' refusals and undecodable messages as tail does, and once,
// after --silent-after seconds with nothing received at all, that nothing has come yet.
// Exit status: 0 on SIGINT/SIGTERM (commands still running get 2 s, then are killed); 1 when an
// endpoint or the keys are invalid. It never stops by itself: silence is what it watches for.
// Threads: run_watch() on one thread, which starts and ends the Receiver's and the Alerter's.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "alert/alert_options.hpp"
#include "cli/command.hpp"
#include "net/client_auth.hpp"

namespace keel::app {

struct WatchOptions {
  std::vector<std::string> endpoints;   // empty: keel::wire::kDefaultPubEndpoint
  AlertOptions alerts;                  // --alert-command, --alert-on, ... (alert/alert_options.hpp)
  ClientAuthOptions auth;               // --server-key, --key, --no-auth (net/client_auth.hpp)
};

// Watches until interrupt_requested() (interrupt.hpp); returns the exit status. `out` and
// `err` are written from the Alerter's thread too, one whole line at a time under a lock.
int run_watch(const WatchOptions& options, std::ostream& out, std::ostream& err);

// Declares `watch` and its options on `app`.
CliCommand add_watch_command(CLI::App& app);

}  // namespace keel::app
