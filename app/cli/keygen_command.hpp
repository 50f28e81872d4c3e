// `keel-cli keygen NAME`: a CURVE key pair for authenticated commands and telemetry.
//
//   keel-cli keygen probe        # probe.key (secret, mode 0600) and probe.pub
//   keel-cli keygen laptop       # a client's pair; give laptop.pub to the probe's allowed list
//
// What it is for: the remote set-up of authentication (docs/security.md).
// Each file holds one 40-character Z85 key on its first line. Existing files are never
// overwritten (a lost secret key would lock the workstation out of its runs).
// Output: the public key and the two paths. Exit status: 0, or 1 with a sentence.
// Threads: main thread only.
#pragma once

#include <ostream>
#include <string>

#include "cli/command.hpp"

namespace keel::app {

int run_keygen(const std::string& name, std::ostream& out, std::ostream& err);

CliCommand add_keygen_command(CLI::App& app);

}  // namespace keel::app
