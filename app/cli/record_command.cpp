#include "cli/record_command.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <memory>
#include <variant>

#include "cli/interrupt.hpp"
#include "keel/wire/codec.hpp"
#include "keel/wire/recording_writer.hpp"
#include "net/subscriber.hpp"

namespace keel::app {

namespace {

using Clock = std::chrono::steady_clock;
using wire::recording::FrameKind;

// Upper bound on one wait, so an interrupt is noticed promptly.
constexpr int64_t kMaxWaitMs = 200;

}  // namespace

int run_record(const RecordOptions& options, std::ostream& err) {
  std::vector<std::string> endpoints = options.endpoints;
  if (endpoints.empty()) endpoints.push_back(wire::kDefaultPubEndpoint);
  std::unique_ptr<Subscriber> subscriber;
  try {
    subscriber = std::make_unique<Subscriber>(endpoints, ClientAuth::from_options(options.auth));
  } catch (const std::exception& error) {
    err << "keel-cli: " << error.what() << '\n';
    return 1;
  }
  std::string error;
  auto writer = wire::RecordingWriter::create(options.out, {}, error);
  if (!writer) {
    err << "keel-cli: " << error << '\n';
    return 1;
  }
  const auto timeout = std::chrono::milliseconds(std::max<int64_t>(1, std::llround(options.timeout_secs * 1000.0)));
  Clock::time_point deadline = Clock::now() + timeout;
  uint64_t written = 0;
  int64_t last_step = 0;
  std::string refusal_told;
  int status = 0;
  std::vector<char> payload;
  while (!interrupt_requested()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      err << "keel-cli: nothing received for " << options.timeout_secs << " s"
          << (subscriber->refusal().empty() ? "" : ": refused: " + subscriber->refusal()) << '\n';
      status = 2;
      break;
    }
    ReceiveResult received = subscriber->receive(static_cast<int>(std::min<int64_t>(left.count(), kMaxWaitMs)));
    if (subscriber->refusal() != refusal_told) {
      refusal_told = subscriber->refusal();
      if (!refusal_told.empty()) err << "keel-cli: refused: " << refusal_told << '\n';
    }
    if (received.status == ReceiveStatus::kDecodeError) {
      err << "keel-cli: warning: dropped an undecodable message: " << received.error << '\n';
      continue;
    }
    if (received.status != ReceiveStatus::kMessage) continue;
    deadline = Clock::now() + timeout;
    FrameKind kind;
    if (const auto* step = std::get_if<wire::StepRecord>(&received.message)) {
      kind = FrameKind::step;
      last_step = step->step;
    } else if (const auto* event = std::get_if<wire::Event>(&received.message)) {
      kind = FrameKind::event;
      last_step = std::max(last_step, event->step);
    } else if (std::holds_alternative<wire::RunDescription>(received.message)) {
      kind = FrameKind::run;
    } else {
      continue;   // acks and commands are not the run's history
    }
    wire::encode(received.message, payload);
    if (!writer->append(kind, last_step, payload.data(), payload.size()) || !writer->flush()) {
      err << "keel-cli: " << writer->error() << '\n';
      continue;
    }
    ++written;
    if (options.count > 0 && written >= options.count) break;
  }
  if (!writer->close()) err << "keel-cli: " << writer->error() << '\n';
  err << "keel-cli: recorded " << written << " messages to " << options.out << " (" << writer->file_bytes()
      << " bytes" << (writer->lost_messages() ? ", " + std::to_string(writer->lost_messages()) + " lost" : "")
      << ")\n";
  return status;
}

CliCommand add_record_command(CLI::App& app) {
  auto options = std::make_shared<RecordOptions>();
  CLI::App* command = app.add_subcommand("record", "Record what probes publish into a recording file");
  command
      ->add_option("-e,--endpoint", options->endpoints,
                   std::string("PUB endpoint of a probe; repeat for several ranks (default ") +
                       wire::kDefaultPubEndpoint + ")")
      ->type_name("ENDPOINT");
  command->add_option("-o,--out", options->out, "The recording to create (never an existing file)")
      ->required()
      ->type_name("FILE");
  command->add_option("-n,--count", options->count, "Stop after N messages")->type_name("N");
  command->add_option("-t,--timeout", options->timeout_secs, "Exit 2 when nothing arrives for SECS seconds")
      ->type_name("SECS")
      ->capture_default_str();
  add_client_auth_options(*command, options->auth);
  return CliCommand{command, [options] {
                      install_interrupt_handler();
                      return run_record(*options, std::cerr);
                    }};
}

}  // namespace keel::app
