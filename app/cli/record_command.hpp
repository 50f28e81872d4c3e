// `keel-cli record --endpoint E --out FILE`: record a run from outside the trainer.
//
//   keel-cli record --endpoint tcp://10.0.0.5:5557 --out run.keelrec
//
// What it is for: a probe with recording off (ProbeOptions::record_dir ""), or one on another
// machine: what it publishes goes into a recording (PROTOCOL §10) that `keel --open` and
// `keel-cli summary|export` read like the probe's own. Every run description, step record and
// event received is written, re-encoded as it was sent, and the file is flushed after each
// message, so stopping keel-cli at any moment (Ctrl-C, a kill) leaves a file that opens. Only
// what arrives after it connects is recorded (the probe's ring is not asked for); a message a
// slow disk or network lost shows as a gap in the steps.
// Exit status: 0 on SIGINT/SIGTERM or after --count messages; 1 when the file cannot be
// created or an endpoint is invalid; 2 when nothing arrives for --timeout seconds (the file
// keeps what came before).
// Threads: main thread only.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "net/client_auth.hpp"

namespace keel::app {

struct RecordOptions {
  std::vector<std::string> endpoints;   // empty: keel::wire::kDefaultPubEndpoint
  std::string out;
  uint64_t count = 0;                   // 0: until interrupted or timed out
  double timeout_secs = 60;
  ClientAuthOptions auth;
};

int run_record(const RecordOptions& options, std::ostream& err);

CliCommand add_record_command(CLI::App& app);

}  // namespace keel::app
