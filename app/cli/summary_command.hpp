// `keel-cli summary FILE`: a recorded run in ten lines.
//
//   keel-cli summary keel-runs/host-4242-1764040000000-rank0.keelrec
//
// What it is for: the first look at a run nobody watched: what it was, how far it got, how
// many updates were skipped and why, where and why it first went non-finite, and which layers
// were loudest (largest grad norm); then each rewind, and each warning of the forecaster with its
// numbers (a line each, the first eight of each). Reads a recording or a dump's telemetry.msgpack
// (net/recording_file.hpp); what had to be skipped in a damaged file goes to stderr.
// Exit status: 0 when the file was read (even if damaged in part), 1 when it cannot be read.
// Threads: main thread only.
#pragma once

#include <ostream>
#include <string>

#include "cli/command.hpp"

namespace keel::app {

int run_summary(const std::string& path, std::ostream& out, std::ostream& err);

CliCommand add_summary_command(CLI::App& app);

}  // namespace keel::app
