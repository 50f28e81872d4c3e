// AlertOptions: what `keel-cli watch` and the dashboard (keel --alert-command) alert on and how,
// and the command-line options that set it, declared once for both programs.
//
// What it is for: the watcher and the dashboard take the same alert options with the same
// words and defaults (docs/watching.md, "Alerts"):
//   --alert-command CMD   run CMD through /bin/sh -c for each alert, the alert as one JSON object
//                         on its standard input (alert_json.hpp)
//   --alert-on KINDS      the kinds that alert, comma-separated (default: all of kAlertKinds)
//   --alert-interval SECS at most one alert per kind and rank every SECS (default 60)
//   --silent-after SECS   a rank that sent steps and then nothing for SECS alerts "silent" (120)
//   --alert-timeout SECS  a command still running after SECS is killed (default 30)
//   --notify              a desktop notification too (notify-send), where the desktop has one
// Threads: plain value; add_alert_options on the main thread, before parsing.
#pragma once

#include <iterator>
#include <string>
#include <vector>

#include "alert/alert.hpp"

namespace CLI {
class App;
}

namespace keel::app {

struct AlertOptions {
  std::string command;                // "" : no command is run
  std::vector<std::string> kinds{std::begin(kAlertKinds), std::end(kAlertKinds)};
  double interval_secs = 60;
  double silent_after_secs = 120;
  double timeout_secs = 30;
  bool notify = false;

  // Whether anything is done with an alert beyond printing it: the dashboard starts no alert
  // thread without one.
  bool acts() const { return !command.empty() || notify; }
};

// Declares the options above on `app`, storing into `options`.
void add_alert_options(CLI::App& app, AlertOptions& options);

// "warning, first_nonfinite, rewind, rewind_stopped, silent (after 120 s)": what the alerts
// are on, for the line a program says when it starts watching.
std::string alert_kinds_text(const AlertOptions& options);

}  // namespace keel::app
