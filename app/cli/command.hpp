// CliCommand: how a keel-cli subcommand plugs into main().
//
// What it is for: each subcommand (tail, and later send, record, keygen) lives in its own
// file with one add_<name>_command(CLI::App&) that declares its options on a CLI11
// subcommand and returns the CliCommand that main() runs when that subcommand was given.
// Threads: main thread only.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace keel::app {

struct CliCommand {
  CLI::App* cli = nullptr;   // owned by the parent CLI::App
  std::function<int()> run;  // returns the process exit status
};

}  // namespace keel::app
