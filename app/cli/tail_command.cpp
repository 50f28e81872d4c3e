#include "cli/tail_command.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <variant>

#include "cli/interrupt.hpp"
#include "cli/received_telemetry.hpp"
#include "text/json_format.hpp"
#include "text/layer_names.hpp"
#include "text/table_format.hpp"
#include "keel/wire/codec.hpp"

namespace keel::app {
namespace {

using Clock = std::chrono::steady_clock;

// Upper bound on one wait, so an interrupt that lands between checks is noticed promptly
// even if the signal went to another thread and did not interrupt our wait.
constexpr int kMaxWaitMs = 200;

std::string joined(const std::vector<std::string>& endpoints) {
  std::string out;
  for (const std::string& endpoint : endpoints) out += (out.empty() ? "" : ", ") + endpoint;
  return out;
}

// CLI11's PositiveNumber reports its range up to DBL_MAX in full; say it plainly instead.
CLI::Validator greater_than_zero() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        if (end == text.c_str() || *end != '\0' || !(value > 0)) {
          return "must be a number greater than 0, got '" + text + "'";
        }
        return {};
      },
      "> 0");
}

// "10" rather than "10.000000", "1.5" when the user asked for that.
std::string seconds_text(double seconds) {
  std::ostringstream out;
  out << seconds;
  return out.str();
}

// Lines that fit between two headers so that one is always on screen: the terminal's rows
// less the line the cursor waits on; vmstat's 24-row screen when stdout is no terminal.
int lines_per_screen() {
  winsize size{};
  const int rows = ::ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_row > 0 ? size.ws_row : 24;
  return std::max(rows - 1, 2);
}

}  // namespace

bool tail_prints(const keel::wire::Message& message, const TailOptions& options) {
  if (std::holds_alternative<keel::wire::Event>(message)) return true;
  if (options.events_only) return false;
  const auto* step = std::get_if<keel::wire::StepRecord>(&message);
  if (step == nullptr || options.every <= 1) return true;
  return step->step % static_cast<int64_t>(options.every) == 0;
}

int run_tail(const TailOptions& options, std::ostream& out, std::ostream& err) {
  std::vector<std::string> endpoints = options.endpoints;
  if (endpoints.empty()) endpoints.push_back(keel::wire::kDefaultPubEndpoint);
  std::unique_ptr<ReceivedTelemetry> telemetry;
  try {
    telemetry = std::make_unique<ReceivedTelemetry>(endpoints, options.auth);
  } catch (const std::exception& error) {
    err << "keel-cli: " << error.what() << '\n';
    return 1;
  }
  const ReceivedTelemetry::Say say = [&err](const std::string& line) { err << line << '\n'; };

  const auto timeout = std::chrono::milliseconds(
      std::max<int64_t>(1, std::llround(options.timeout_secs * 1000.0)));
  LayerNames names;
  TablePrinter table(options.lines_per_header);
  uint64_t printed = 0;
  std::vector<keel::wire::Message> inbox;
  Clock::time_point deadline = Clock::now() + timeout;

  while (!interrupt_requested()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      err << "keel-cli: nothing received from " << joined(endpoints);
      if (telemetry->messages() == 0) {
        err << " within " << seconds_text(options.timeout_secs) << " s";
      } else {
        err << " for " << seconds_text(options.timeout_secs) << " s after message " << telemetry->messages();
      }
      if (telemetry->decode_errors() > 0) err << " (" << telemetry->decode_errors() << " undecodable messages dropped)";
      for (const std::string& refusal : telemetry->refusals()) {
        if (!refusal.empty()) err << ": refused: " << refusal;
      }
      err << '\n';
      return 2;
    }
    inbox.clear();
    // Silence is measured in messages received, printed or not: --every 1000 on a slow run
    // is not a run that stopped. A history arriving is not silence either.
    if (telemetry->receive(std::min(left, std::chrono::milliseconds(kMaxWaitMs)), inbox, say)) {
      deadline = Clock::now() + timeout;
    }
    for (const keel::wire::Message& message : inbox) {
      if (const auto* run = std::get_if<keel::wire::RunDescription>(&message)) names.learn(*run);
      if (!tail_prints(message, options)) continue;
      if (options.json) {
        out << to_json_line(message, names) << '\n';
      } else {
        out << table.format(message, names);
      }
      // Flushed per message: tail is read live, often through a pipe that would buffer.
      out.flush();
      ++printed;
      if (options.count > 0 && printed >= options.count) return 0;
    }
  }
  return 0;
}

CliCommand add_tail_command(CLI::App& app) {
  auto options = std::make_shared<TailOptions>();
  CLI::App* tail = app.add_subcommand(
      "tail", "Print every message the probes publish: run descriptions, steps, events, acks");
  tail->add_option("-e,--endpoint", options->endpoints,
                   std::string("PUB endpoint of a probe; repeat for several ranks (default ") +
                       keel::wire::kDefaultPubEndpoint + ")")
      ->type_name("ENDPOINT");
  tail->add_option("-n,--count", options->count, "Exit 0 after printing N messages")
      ->type_name("N")
      ->check(greater_than_zero());
  tail->add_option("-t,--timeout", options->timeout_secs,
                   "Exit 2 when nothing arrives for SECS seconds (at start or between messages)")
      ->type_name("SECS")
      ->check(greater_than_zero())
      ->capture_default_str();
  tail->add_flag("--json", options->json, "One JSON object per message per line");
  CLI::Option* every =
      tail->add_option("--every", options->every,
                       "Print the steps whose number is a multiple of N (every rank's same steps); events always")
          ->type_name("N")
          ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 40));
  tail->add_flag("--events-only", options->events_only,
                 "Print only events (non-finite steps, skips, spikes, dumps, ...), no steps")
      ->excludes(every);
  add_client_auth_options(*tail, options->auth);
  return CliCommand{tail, [options] {
                      install_interrupt_handler();
                      options->lines_per_header = lines_per_screen();
                      return run_tail(*options, std::cout, std::cerr);
                    }};
}

}  // namespace keel::app
