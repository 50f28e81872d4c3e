// `keel-cli tail`: print every message that one or more probes publish.
//
// What it is for: watching a run without the dashboard (over ssh, in CI, piped to jq), and the
// simplest check that a probe publishes at all. It receives on the dashboard's own network
// thread (net/receiver.hpp), so it backfills as the dashboard does: started before the trainer
// or attached to a running one, it prints every step and event the probe still keeps from
// before its subscription went live, then the live stream, with no hole and no twin at the
// seam (PROTOCOL §6); a probe that takes no commands is printed live after the 2 s its history
// request waits. Default output is a readable table, its column
// header repeated every screenful of lines (the terminal's height, 24 lines when the output is
// not a terminal), as vmstat does; --json writes one JSON object per message per line
// (json_format.hpp), flushed as it arrives. A trainer steps many times a second: --every N
// prints only the steps whose number is a multiple of N (the same steps of every rank), and
// --events-only none of them; events, which are what a watcher waits for, are always printed.
// Exit status: 0 after --count messages printed or on SIGINT/SIGTERM; 1 when an endpoint is invalid;
// 2 when nothing arrives within --timeout seconds (from the start, or since the last message).
// Undecodable messages are reported on stderr and skipped; a probe that refuses this client's
// keys (another user's run, PROTOCOL §6) is reported on stderr with the reason and the fix.
// Threads: run_tail() on one thread, which starts and ends the Receiver's own.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "keel/wire/messages.hpp"
#include "net/client_auth.hpp"

namespace keel::app {

struct TailOptions {
  std::vector<std::string> endpoints;  // empty: keel::wire::kDefaultPubEndpoint
  uint64_t count = 0;                  // 0: until interrupted or timed out
  double timeout_secs = 10;
  bool json = false;
  uint64_t every = 1;                  // step records printed: those whose step is a multiple of it
  bool events_only = false;            // print events only (no descriptions, steps, commands, acks)
  int lines_per_header = 23;           // table: the step header is repeated after this many lines
                                       // (a 24-row screen); 0: only after each new description
  ClientAuthOptions auth;              // --server-key, --key, --no-auth (net/client_auth.hpp)
};

// Runs tail until one of the exit conditions above; returns the exit status. Stops early when
// interrupt_requested() (interrupt.hpp) becomes true.
int run_tail(const TailOptions& options, std::ostream& out, std::ostream& err);

// Whether tail prints `message` under `options` (--every, --events-only).
bool tail_prints(const keel::wire::Message& message, const TailOptions& options);

// Declares `tail` and its options on `app`.
CliCommand add_tail_command(CLI::App& app);

}  // namespace keel::app
