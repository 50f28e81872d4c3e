#include "cli/history_command.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <variant>

#include "text/json_format.hpp"
#include "text/layer_names.hpp"
#include "cli/send_request.hpp"
#include "text/table_format.hpp"
#include "keel/wire/codec.hpp"
#include "keel/wire/vocabulary.hpp"
#include "net/client_auth.hpp"
#include "net/command_socket.hpp"
#include "net/subscriber.hpp"

namespace keel::app {
namespace {

using Clock = std::chrono::steady_clock;

std::string seconds_text(double seconds) {
  std::ostringstream out;
  out << seconds;
  return out.str();
}

Clock::duration duration_of(double seconds) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

int wait_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count(), 0, 200));
}

// The newest `limit` step records of an answer that holds more, with the run descriptions
// among them and the one the first of them was published under, in the order they came.
class NewestSteps {
 public:
  explicit NewestSteps(int64_t limit) : limit_(limit) {}

  void add(keel::wire::Message message) {
    const bool step = std::holds_alternative<keel::wire::StepRecord>(message);
    held_.push_back(std::move(message));
    if (!step || ++steps_ <= limit_) return;
    // Drops the oldest step and what came before it, keeping the description in force.
    while (true) {
      const bool oldest_step = std::holds_alternative<keel::wire::StepRecord>(held_.front());
      if (!oldest_step) in_force_ = std::move(held_.front());
      held_.pop_front();
      if (oldest_step) break;
    }
    --steps_;
  }

  // Hands everything held to `print`, oldest first, and forgets it.
  template <class Print>
  void flush(Print&& print) {
    // A description held first supersedes the one before it.
    const bool described = !held_.empty() && !std::holds_alternative<keel::wire::StepRecord>(held_.front());
    if (in_force_ && !described) print(*in_force_);
    for (const keel::wire::Message& message : held_) print(message);
    held_.clear();
    in_force_.reset();
    steps_ = 0;
  }

 private:
  int64_t limit_;
  int64_t steps_ = 0;
  std::deque<keel::wire::Message> held_;
  std::optional<keel::wire::Message> in_force_;
};

// Prints the answer's messages as they are handed over (a table, or JSON lines), naming layers
// by the descriptions among them, and says on stderr what it printed.
class HistoryPrinter {
 public:
  HistoryPrinter(std::ostream& out, bool json) : out_(out), json_(json) {}

  void operator()(const keel::wire::Message& message) {
    if (const auto* run = std::get_if<keel::wire::RunDescription>(&message)) names_.learn(*run);
    if (const auto* record = std::get_if<keel::wire::StepRecord>(&message)) {
      if (printed_++ == 0) first_step_ = record->step;
      last_step_ = record->step;
    }
    out_ << (json_ ? to_json_line(message, names_) + "\n" : table_.format(message, names_));
  }

  // The summary line, once the probe's ack came: `received` steps and `events` events.
  void summarize(std::ostream& err, int64_t received, int64_t events, const keel::wire::Ack& ack) const {
    err << "keel-cli: " << printed_;
    err << (printed_ < received ? " of the " + std::to_string(received) + " steps in" : " steps from");
    err << " the probe's history";
    if (printed_ > 0) err << " (" << first_step_ << ".." << last_step_ << ")";
    if (events > 0) err << " and " << events << " events";
    if (ack.count != received) err << "; the probe sent " << ack.count;
    err << '\n';
  }

 private:
  std::ostream& out_;
  bool json_;
  LayerNames names_;
  TablePrinter table_;
  int64_t printed_ = 0, first_step_ = 0, last_step_ = 0;
};

// Listens on the telemetry endpoint for the run description a probe sends every new
// subscriber, and prints it, so that layers print by name; warns when none comes. False when
// the endpoint cannot be subscribed to, having said why.
bool print_run_description(const HistoryOptions& options, const std::string& endpoint, HistoryPrinter& print,
                           std::ostream& err) {
  try {
    Subscriber subscriber({endpoint}, ClientAuth::from_options(options.auth));
    const Clock::time_point deadline = Clock::now() + duration_of(options.describe_wait_secs);
    while (Clock::now() < deadline) {
      ReceiveResult received = subscriber.receive(wait_ms(deadline));
      const auto* run = std::get_if<keel::wire::RunDescription>(&received.message);
      if (received.status != ReceiveStatus::kMessage || run == nullptr) continue;
      print(received.message);
      return true;
    }
    err << "keel-cli: warning: no run description from " << endpoint << " within "
        << seconds_text(options.describe_wait_secs) << " s; layers print by index";
    if (!subscriber.refusal().empty()) err << " (refused: " << subscriber.refusal() << ")";
    err << '\n';
    return true;
  } catch (const std::exception& error) {
    err << "keel-cli: " << error.what() << '\n';
    return false;
  }
}

keel::wire::Command history_request() {
  keel::wire::Command command;
  command.rank = -1;
  command.id = 1;
  command.kind = wire::command_kind::kHistory;
  // The probe sends all the events it keeps only with its whole ring, and otherwise those of
  // the steps it sends (PROTOCOL §6). The event a user asks history for, the run's first
  // non-finite step, is most often older than the newest N steps: so the whole ring is asked
  // for, and its newest `count` steps are printed.
  command.count = kWholeRing;
  return command;
}

// Prints the answer to `command` as it arrives (its newest options.count steps, then its
// events) until the probe's ack; returns run_history's exit status.
int print_history_answer(CommandSocket& socket, const keel::wire::Command& command, const HistoryOptions& options,
                         const std::string& command_endpoint, HistoryPrinter& print, std::ostream& out,
                         std::ostream& err) {
  const bool trimmed = options.count < kWholeRing;
  NewestSteps newest(options.count);
  bool flushed = false;
  auto flush = [&] {
    if (!flushed) newest.flush(print);
    flushed = true;
  };
  // Silence, not the whole answer, is bounded: a large ring keeps arriving for a while.
  Clock::time_point deadline = Clock::now() + duration_of(options.timeout_secs);
  int64_t received = 0, events = 0;
  while (Clock::now() < deadline) {
    ReceiveResult reply = socket.receive(wait_ms(deadline));
    if (reply.status == ReceiveStatus::kDecodeError) {
      err << "keel-cli: warning: dropped an undecodable reply: " << reply.error << '\n';
      continue;
    }
    if (reply.status != ReceiveStatus::kMessage) continue;
    deadline = Clock::now() + duration_of(options.timeout_secs);
    // Steps, with the descriptions where the history spans a change of layers (the records
    // after one have its layers).
    const bool step = std::holds_alternative<keel::wire::StepRecord>(reply.message);
    if (step || std::holds_alternative<keel::wire::RunDescription>(reply.message)) {
      received += step ? 1 : 0;
      if (trimmed) {
        newest.add(std::move(reply.message));
      } else {
        print(reply.message);
      }
      continue;
    }
    // The events follow the steps, oldest first.
    if (std::holds_alternative<keel::wire::Event>(reply.message)) {
      flush();
      ++events;
      print(reply.message);
      continue;
    }
    const auto* ack = std::get_if<keel::wire::Ack>(&reply.message);
    if (ack == nullptr || (ack->id != command.id && ack->id != 0)) continue;
    flush();
    out.flush();
    if (!ack->ok) {
      err << "keel-cli: the probe refused the history request: " << ack->error << '\n';
      return 1;
    }
    print.summarize(err, received, events, *ack);
    return 0;
  }
  flush();
  out.flush();
  err << "keel-cli: no answer from " << command_endpoint << " for " << seconds_text(options.timeout_secs)
      << " s (after " << received << " steps)\n";
  return 2;
}

}  // namespace

int run_history(const HistoryOptions& options, std::ostream& out, std::ostream& err) {
  const std::string endpoint = options.endpoint.empty() ? keel::wire::kDefaultPubEndpoint : options.endpoint;
  std::string command_endpoint = options.command_endpoint;
  if (command_endpoint.empty()) command_endpoint = keel::wire::command_endpoint_for(endpoint);
  if (command_endpoint.empty()) {
    err << "keel-cli: " << endpoint
        << " has no numeric port to derive the command endpoint from; give --command-endpoint\n";
    return 1;
  }
  HistoryPrinter print(out, options.json);
  if (!print_run_description(options, endpoint, print, err)) return 1;
  const keel::wire::Command command = history_request();
  const std::unique_ptr<CommandSocket> socket = send_request(command_endpoint, options.auth, command, err);
  if (!socket) return 1;
  return print_history_answer(*socket, command, options, command_endpoint, print, out, err);
}

CliCommand add_history_command(CLI::App& app) {
  auto options = std::make_shared<HistoryOptions>();
  CLI::App* history = app.add_subcommand(
      "history", "Print the recent steps and events a probe keeps (what a late client backfills)");
  history->add_option("-e,--endpoint", options->endpoint,
                      std::string("PUB endpoint of the probe; the request goes to its port + 1 (default ") +
                          keel::wire::kDefaultPubEndpoint + ")")
      ->type_name("ENDPOINT");
  history->add_option("--command-endpoint", options->command_endpoint,
                      "Command (ROUTER) endpoint of the probe, instead of deriving it from --endpoint")
      ->type_name("ENDPOINT");
  add_client_auth_options(*history, options->auth);
  history->add_option("-n,--count", options->count,
                      "Most recent N steps (default: all the probe keeps); the events are all it keeps, whatever N")
      ->type_name("N")
      ->check(CLI::Range(int64_t{1}, kWholeRing));
  history->add_option("-t,--timeout", options->timeout_secs,
                      "Exit 2 when the probe is silent for SECS seconds before its answer ends")
      ->type_name("SECS")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  history->add_flag("--json", options->json, "One JSON object per message per line");
  return CliCommand{history, [options] { return run_history(*options, std::cout, std::cerr); }};
}

}  // namespace keel::app
