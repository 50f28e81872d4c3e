#include "cli/watch_command.hpp"

#include <chrono>
#include <cmath>
#include <iostream>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>

#include "alert/alerter.hpp"
#include "cli/interrupt.hpp"
#include "cli/received_telemetry.hpp"
#include "keel/wire/codec.hpp"

namespace keel::app {
namespace {

using Clock = std::chrono::steady_clock;

// Upper bound on one wait, so an interrupt is noticed promptly whichever thread it reached.
constexpr auto kMaxWait = std::chrono::milliseconds(200);

std::string joined(const std::vector<std::string>& endpoints) {
  std::string out;
  for (const std::string& endpoint : endpoints) out += (out.empty() ? "" : ", ") + endpoint;
  return out;
}

std::string seconds_text(double seconds) {
  std::ostringstream out;
  out << seconds;
  return out.str();
}

// What the watcher says it listens for: the endpoints, the kinds, the limit and the command.
std::string watching_line(const std::vector<std::string>& endpoints, const AlertOptions& alerts) {
  std::string line = "keel-cli: watching " + joined(endpoints) + " for " + alert_kinds_text(alerts) +
                     "; at most one alert per kind and rank every " + seconds_text(alerts.interval_secs) + " s";
  // Not the command itself: a webhook's URL is often its secret, and stderr goes to logs.
  if (!alerts.command.empty()) line += "; each runs the alert command";
  return line;
}

}  // namespace

int run_watch(const WatchOptions& options, std::ostream& out, std::ostream& err) {
  std::vector<std::string> endpoints = options.endpoints;
  if (endpoints.empty()) endpoints.push_back(keel::wire::kDefaultPubEndpoint);
  // Lines come from this thread and the Alerter's: each is written whole.
  std::mutex print_mutex;
  const auto print = [&print_mutex](std::ostream& stream, const std::string& line) {
    std::lock_guard<std::mutex> lock(print_mutex);
    stream << line << '\n';
    // Flushed per line: a watcher's output is read live, or by a file a pager follows.
    stream.flush();
  };
  std::unique_ptr<ReceivedTelemetry> telemetry;
  try {
    telemetry = std::make_unique<ReceivedTelemetry>(endpoints, options.auth);
  } catch (const std::exception& error) {
    print(err, std::string("keel-cli: ") + error.what());
    return 1;
  }
  print(err, watching_line(endpoints, options.alerts));
  const AlertSinks sinks{[&](const std::string& line) { print(out, line); },
                         [&](const std::string& line) { print(err, "keel-cli: " + line); },
                         [&](const std::string& line) { print(err, "keel-cli: " + line); }};
  Alerter alerter(options.alerts, sinks);

  const ReceivedTelemetry::Say say = [&](const std::string& line) { print(err, line); };
  const Clock::time_point nothing_yet_after =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options.alerts.silent_after_secs));
  bool said_nothing_yet = false;
  std::vector<keel::wire::Message> inbox;
  while (!interrupt_requested()) {
    inbox.clear();
    telemetry->receive(kMaxWait, inbox, say);
    alerter.observe(inbox);
    if (!said_nothing_yet && telemetry->messages() == 0 && Clock::now() >= nothing_yet_after) {
      said_nothing_yet = true;
      print(err, "keel-cli: nothing received from " + joined(endpoints) + " in " +
                     seconds_text(options.alerts.silent_after_secs) +
                     " s; still waiting (is the trainer running, and publishing there?)");
    }
  }
  return 0;
}

CliCommand add_watch_command(CLI::App& app) {
  auto options = std::make_shared<WatchOptions>();
  CLI::App* watch = app.add_subcommand(
      "watch", "Alert on warnings, non-finite steps, rewinds and ranks gone silent: a line each, a command, a notification");
  watch->add_option("-e,--endpoint", options->endpoints,
                    std::string("PUB endpoint of a probe; repeat for several ranks (default ") +
                        keel::wire::kDefaultPubEndpoint + ")")
      ->type_name("ENDPOINT");
  add_alert_options(*watch, options->alerts);
  add_client_auth_options(*watch, options->auth);
  return CliCommand{watch, [options] {
                      install_interrupt_handler();
                      return run_watch(*options, std::cout, std::cerr);
                    }};
}

}  // namespace keel::app
