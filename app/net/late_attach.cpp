#include "net/late_attach.hpp"

#include <cstdint>
#include <exception>
#include <random>
#include <utility>
#include <variant>

namespace keel::app {
namespace {

// Replies taken per poll: a whole default ring (4096 steps) in one go, while still returning
// to the telemetry sockets between bursts of a larger one.
constexpr int kRepliesPerPoll = 8192;

// 64 random bits in hex: two clients of one probe never share one.
std::string random_token() {
  std::random_device source;
  const uint64_t bits = (uint64_t{source()} << 32) ^ source();
  static constexpr char kHex[] = "0123456789abcdef";
  std::string token(16, '0');
  for (size_t i = 0; i < token.size(); ++i) token[i] = kHex[(bits >> (4 * i)) & 0xf];
  return token;
}

}  // namespace

LateAttach::LateAttach(std::string command_endpoint, BackfillOptions options, ClientAuth auth)
    : command_endpoint_(std::move(command_endpoint)),
      token_(command_endpoint_.empty() ? std::string() : random_token()),
      auth_(std::move(auth)),
      backfill_(options) {}

void LateAttach::on_live(keel::wire::Message&& message, std::vector<keel::wire::Message>& out) {
  backfill_.on_live(std::move(message), Backfill::Clock::now(), out);
}

void LateAttach::poll(std::vector<keel::wire::Message>& out) {
  if (backfill_.request_due()) {
    socket_.reset();
    if (command_endpoint_.empty()) {
      backfill_.request_failed("the endpoint has no port + 1 for a command socket", out);
      return;
    }
    std::string error;
    try {
      socket_ = std::make_unique<CommandSocket>(command_endpoint_, auth_);
    } catch (const std::exception& failure) {
      backfill_.request_failed(failure.what(), out);
      return;
    }
    const uint64_t id = next_id_++;
    keel::wire::Command command = backfill_.history_command(id);
    command.token = token_;
    if (!socket_->send(command, error)) {
      socket_.reset();
      backfill_.request_failed(error, out);
      return;
    }
    backfill_.request_sent(id, Backfill::Clock::now());
  }
  if (socket_) {
    for (int n = 0; n < kRepliesPerPoll && socket_; ++n) {
      ReceiveResult reply = socket_->receive(0);
      if (reply.status == ReceiveStatus::kTimeout || reply.status == ReceiveStatus::kInterrupted) {
        break;
      }
      // A reply that does not decode is not part of the history; the ack's count says so.
      if (reply.status != ReceiveStatus::kMessage) continue;
      if (auto* record = std::get_if<keel::wire::StepRecord>(&reply.message)) {
        backfill_.on_history_step(std::move(*record), Backfill::Clock::now());
      } else if (auto* event = std::get_if<keel::wire::Event>(&reply.message)) {
        backfill_.on_history_event(std::move(*event), Backfill::Clock::now());
      } else if (auto* description = std::get_if<keel::wire::RunDescription>(&reply.message)) {
        backfill_.on_history_description(std::move(*description), Backfill::Clock::now());
      } else if (const auto* ack = std::get_if<keel::wire::Ack>(&reply.message)) {
        backfill_.on_ack(*ack, out);
        if (backfill_.phase() != BackfillPhase::kWaiting) socket_.reset();
      }
    }
  }
  backfill_.on_tick(Backfill::Clock::now(), out);
  if (backfill_.phase() != BackfillPhase::kWaiting) socket_.reset();
}

}  // namespace keel::app
