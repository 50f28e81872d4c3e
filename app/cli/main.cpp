// keel-cli: headless client of keel probes. One subcommand per file (tail_command.cpp, ...);
// this file only assembles them.
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/command.hpp"
#include "cli/history_command.hpp"
#include "cli/export_command.hpp"
#include "cli/keygen_command.hpp"
#include "cli/record_command.hpp"
#include "cli/send_command.hpp"
#include "cli/summary_command.hpp"
#include "cli/tail_command.hpp"
#include "cli/watch_command.hpp"

int main(int argc, char** argv) {
  CLI::App app{"keel-cli: headless client of keel training-stability probes", "keel-cli"};
  app.set_version_flag("--version", KEEL_VERSION_STRING);
  app.require_subcommand(1);

  const std::vector<keel::app::CliCommand> commands = {
      keel::app::add_tail_command(app),
      keel::app::add_watch_command(app),
      keel::app::add_send_command(app),
      keel::app::add_history_command(app),
      keel::app::add_keygen_command(app),
      keel::app::add_record_command(app),
      keel::app::add_summary_command(app),
      keel::app::add_export_command(app),
  };

  CLI11_PARSE(app, argc, argv);
  for (const keel::app::CliCommand& command : commands) {
    if (command.cli->parsed()) return command.run();
  }
  return 0;
}
