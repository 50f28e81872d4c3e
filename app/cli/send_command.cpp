#include "cli/send_command.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <memory>
#include <random>
#include <sstream>
#include <variant>
#include <vector>

#include "text/json_format.hpp"
#include "text/layer_names.hpp"
#include "keel/wire/codec.hpp"
#include "cli/send_request.hpp"
#include "keel/wire/vocabulary.hpp"
#include "net/client_auth.hpp"
#include "net/command_socket.hpp"

namespace keel::app {
namespace {

using Clock = std::chrono::steady_clock;

constexpr double kDefaultTimeoutSecs = 10;
// Writing a large model and its optimizer state takes a while before the ack can come.
constexpr double kDefaultDumpTimeoutSecs = 120;
// The longest single wait for a reply: the handshake's refusal is read between waits.
constexpr int64_t kWaitSliceMs = 200;

// Ids only need to tell this client's commands apart from other clients' acks on a shared
// connection; a random 64-bit value does, without state kept between invocations.
uint64_t random_id() {
  std::random_device device;
  std::mt19937_64 generator((static_cast<uint64_t>(device()) << 32) ^ device() ^
                            static_cast<uint64_t>(Clock::now().time_since_epoch().count()));
  uint64_t id = 0;
  while (id == 0) id = generator();
  return id;
}

std::string seconds_text(double seconds) {
  std::ostringstream out;
  out << seconds;
  return out.str();
}

}  // namespace

int run_send(const SendOptions& options, std::ostream& out, std::ostream& err) {
  const std::string endpoint = options.endpoint.empty() ? keel::wire::kDefaultPubEndpoint : options.endpoint;
  std::string command_endpoint = options.command_endpoint;
  if (command_endpoint.empty()) {
    command_endpoint = keel::wire::command_endpoint_for(endpoint);
    if (command_endpoint.empty()) {
      err << "keel-cli: " << endpoint
          << " has no numeric port to derive the command endpoint from; give --command-endpoint\n";
      return 1;
    }
  }
  keel::wire::Command command = options.command;
  if (command.id == 0) command.id = random_id();

  const std::unique_ptr<CommandSocket> socket =
      send_request(command_endpoint, options.auth, command, err);
  if (!socket) return 1;

  const auto deadline =
      Clock::now() + std::chrono::milliseconds(std::max<int64_t>(1, std::llround(options.timeout_secs * 1000.0)));
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) break;
    // In slices, so a refused handshake is seen (CommandSocket::refusal) while waiting.
    const ReceiveResult reply = socket->receive(static_cast<int>(std::min<int64_t>(left.count(), kWaitSliceMs)));
    if (reply.status == ReceiveStatus::kDecodeError) {
      err << "keel-cli: warning: ignored a reply that does not decode: " << reply.error << '\n';
      continue;
    }
    if (reply.status != ReceiveStatus::kMessage) continue;   // timeout or EINTR: the deadline bounds it
    const auto* ack = std::get_if<keel::wire::Ack>(&reply.message);
    if (ack == nullptr) {
      err << "keel-cli: warning: ignored a reply that is not an ack\n";
      continue;
    }
    // A refusal of bytes the probe could not parse carries id 0; ours always parse, so any
    // other id belongs to someone else.
    if (ack->id != command.id && ack->id != 0) continue;
    out << to_json_line(*ack, LayerNames{}) << '\n';
    out.flush();
    if (!ack->ok) err << "keel-cli: the probe refused the command: " << ack->error << '\n';
    return ack->ok ? 0 : 1;
  }
  if (!socket->refusal().empty()) {
    err << "keel-cli: no acknowledgement from " << command_endpoint << " within " << seconds_text(options.timeout_secs)
        << " s: refused: " << socket->refusal() << " (command id " << command.id << " was not delivered)\n";
    return 2;
  }
  err << "keel-cli: no acknowledgement from " << command_endpoint << " within " << seconds_text(options.timeout_secs)
      << " s (command id " << command.id << "; it may still be applied, it is not resent"
      << (options.auth.no_auth ? "; or the probe requires keys: leave out --no-auth"
          : options.auth.server_key.empty()
              ? "; or the run is not yours: a probe takes commands only with its owner's key unless it was given "
                "others, and refuses the rest at the handshake; or it allows unauthenticated commands: pass --no-auth"
              : "; or the probe refused this client's key at the handshake")
      << ")\n";
  return 2;
}

CliCommand add_send_command(CLI::App& app) {
  auto options = std::make_shared<SendOptions>();
  options->timeout_secs = kDefaultTimeoutSecs;
  CLI::App* send = app.add_subcommand("send", "Send one command to a probe and print its acknowledgement");
  send->require_subcommand(1);
  // Lets --endpoint and --timeout follow the command kind as well as precede it.
  send->fallthrough();
  send->add_option("-e,--endpoint", options->endpoint,
                   std::string("PUB endpoint of the probe; commands go to its port + 1 (default ") +
                       keel::wire::kDefaultPubEndpoint + ")")
      ->type_name("ENDPOINT");
  send->add_option("--command-endpoint", options->command_endpoint,
                   "Command (ROUTER) endpoint of the probe, instead of deriving it from --endpoint")
      ->type_name("ENDPOINT");
  CLI::Option* timeout = send->add_option("-t,--timeout", options->timeout_secs,
                   "Exit 2 when no acknowledgement arrives within SECS seconds (dump: 120 unless given)")
      ->type_name("SECS")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  options->command.rank = -1;
  add_client_auth_options(*send, options->auth);
  send->add_option("-r,--rank", options->command.rank, "Target rank; -1 = whichever probe listens there")
      ->type_name("RANK")
      ->capture_default_str();

  CLI::App* skip = send->add_subcommand("skip", "Skip the next COUNT optimizer updates");
  // Not range-checked here: the probe owns the limit and says so in its refusal.
  skip->add_option("-n,--count", options->command.count, "Number of updates to skip")
      ->type_name("COUNT")
      ->capture_default_str();
  skip->add_option("--at-step", options->command.at_step,
                   "Skip from this step on instead of the next (send the same step to every rank of a "
                   "data-parallel job)")
      ->type_name("STEP");
  skip->callback([options] { options->command.kind = wire::command_kind::kSkip; });

  CLI::App* dump = send->add_subcommand(
      "dump", "Write a checkpoint now (model, optimizer, recent telemetry) into the probe's dump directory");
  // The probe sanitises the label and never takes a path from it.
  dump->add_option("-l,--label", options->command.label, "Label for the checkpoint's name")
      ->type_name("LABEL");
  dump->callback([options, timeout] {
    options->command.kind = wire::command_kind::kDump;
    // A dump is acknowledged only once the checkpoint is on disk.
    if (timeout->count() == 0) options->timeout_secs = kDefaultDumpTimeoutSecs;
  });

  CLI::App* policy = send->add_subcommand(
      "policy", "Switch a policy on or off: skip_nonfinite (default on), skip_spike (default off), "
                "dump_nonfinite (default on)");
  auto state = std::make_shared<std::string>();
  // Not checked against a list here: the probe owns the names and says so in its refusal.
  policy->add_option("name", options->command.policy,
                     "Policy name: skip_nonfinite, skip_spike or dump_nonfinite")
      ->required();
  policy->add_option("state", *state, "on or off")->required()->check(CLI::IsMember({"on", "off"}));
  policy->callback([options, state] {
    options->command.kind = wire::command_kind::kPolicy;
    options->command.enable = *state == "on";
  });

  CLI::App* rewind = send->add_subcommand(
      "rewind", "Put back the training state of an earlier step from the probe's snapshots in memory (the probe "
                "must keep them: rewind_every) and go on from there");
  rewind->add_option("--to-step", options->command.to_step,
                     "Go back to the newest snapshot at or before this step (default: the newest)")
      ->type_name("STEP");
  rewind->add_option("--at-step", options->command.at_step,
                     "Rewind at this step's boundary instead of the next (send the same step to every rank of a "
                     "data-parallel job)")
      ->type_name("STEP");
  rewind->callback([options] { options->command.kind = wire::command_kind::kRewind; });

  CLI::App* describe = send->add_subcommand("describe", "Ask the probe to re-send its run description now");
  describe->callback([options] { options->command.kind = wire::command_kind::kDescribe; });

  return CliCommand{send, [options] { return run_send(*options, std::cout, std::cerr); }};
}

}  // namespace keel::app
