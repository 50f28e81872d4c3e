#include "alert/alert_options.hpp"

#include <sstream>

#include <CLI/CLI.hpp>

namespace keel::app {
namespace {

std::string seconds_text(double seconds) {
  std::ostringstream out;
  out << seconds;
  return out.str();
}

}  // namespace

void add_alert_options(CLI::App& app, AlertOptions& options) {
  app.add_option("--alert-command", options.command,
                 "Run CMD (through /bin/sh -c) for each alert, the alert as one JSON object on its standard input; "
                 "its output goes to stderr")
      ->type_name("CMD");
  // CLI11 lists the kinds after the name (IsMember).
  app.add_option("--alert-on", options.kinds, "The kinds that alert, comma-separated (default: all)")
      ->type_name("KINDS")
      ->delimiter(',')
      ->check(CLI::IsMember(std::vector<std::string>(std::begin(kAlertKinds), std::end(kAlertKinds))));
  app.add_option("--alert-interval", options.interval_secs,
                 "At most one alert per kind and rank every SECS; the next one says how many were held back")
      ->type_name("SECS")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--silent-after", options.silent_after_secs,
                 "A rank that sent steps and then nothing for SECS alerts \"silent\" (once per silence)")
      ->type_name("SECS")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--alert-timeout", options.timeout_secs,
                 "An alert command still running after SECS is killed and reported")
      ->type_name("SECS")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_flag("--notify", options.notify,
               "Also show each alert as a desktop notification (notify-send, with DISPLAY or WAYLAND_DISPLAY set)");
}

std::string alert_kinds_text(const AlertOptions& options) {
  std::string out;
  for (const std::string& kind : options.kinds) {
    out += (out.empty() ? "" : ", ") + kind;
    if (kind == kSilentAlertKind) out += " (after " + seconds_text(options.silent_after_secs) + " s)";
  }
  return out.empty() ? std::string("nothing") : out;
}

}  // namespace keel::app
