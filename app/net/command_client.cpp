#include "net/command_client.hpp"

#include <cerrno>
#include <exception>
#include <memory>
#include <sstream>
#include <utility>
#include <variant>

#include <zmq.hpp>

#include "keel/wire/vocabulary.hpp"
#include "net/command_socket.hpp"

namespace keel::app {
namespace {

// One wait for replies; bounds how long a submitted command waits before it is sent and how
// long the destructor waits for the thread.
constexpr int kPollMs = 20;

std::string seconds_text(double seconds) {
  std::ostringstream out;
  out << seconds << " s";
  return out.str();
}

}  // namespace

CommandClient::CommandClient(CommandClientOptions options) : options_(options), next_id_(1) {
  thread_ = std::thread([this] { run(); });
}

CommandClient::~CommandClient() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

uint64_t CommandClient::submit(const std::string& command_endpoint, keel::wire::Command command) {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t id = next_id_++;
  command.id = id;
  CommandStatus status;
  status.id = id;
  status.command_endpoint = command_endpoint;
  status.command = command;
  statuses_[id] = status;
  kept_order_.push_back(id);
  while (kept_order_.size() > kMaxKept) {
    statuses_.erase(kept_order_.front());
    deadlines_.erase(kept_order_.front());
    kept_order_.pop_front();
  }
  if (command_endpoint.empty()) {
    finish(id, CommandState::kRefused, nullptr,
           "not sent: the telemetry endpoint has no port + 1 for a command socket");
    return id;
  }
  outbox_.push_back(Outgoing{id, command_endpoint, std::move(command)});
  return id;
}

std::optional<CommandStatus> CommandClient::status(uint64_t id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto found = statuses_.find(id);
  if (found == statuses_.end()) return std::nullopt;
  return found->second;
}

void CommandClient::finish(uint64_t id, CommandState state, const keel::wire::Ack* ack,
                           const std::string& error) {
  deadlines_.erase(id);
  const auto found = statuses_.find(id);
  if (found == statuses_.end()) return;
  CommandStatus& status = found->second;
  status.answered_late = ack != nullptr && status.state == CommandState::kTimedOut;
  status.state = state;
  if (ack != nullptr) status.ack = *ack;
  status.error = error;
}

// The thread's sockets and scratch, kept across turns.
struct CommandClient::Loop {
  std::map<std::string, std::unique_ptr<CommandSocket>> sockets;
  std::vector<Outgoing> sending;
  std::vector<zmq::pollitem_t> items;
  std::vector<CommandSocket*> polled;
};

void CommandClient::run() {
  Loop loop;
  while (!stop_.load()) {
    try {
      serve_once(loop);
    } catch (const std::exception& failure) {
      // A socket failure used to leave this thread with the exception and end the dashboard.
      channel_failed(loop, failure.what());
      std::this_thread::sleep_for(std::chrono::milliseconds(kPollMs));
    }
  }
}

void CommandClient::channel_failed(Loop& loop, const std::string& why) {
  // Fresh sockets for the next commands; those in flight may have reached their probe.
  loop.sockets.clear();
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<uint64_t> pending;
  for (const auto& [id, deadline] : deadlines_) pending.push_back(id);
  for (uint64_t id : pending) {
    finish(id, CommandState::kTimedOut, nullptr,
           "the command channel failed (" + why + "); it may still be applied, it is not resent");
  }
  // Taken from the outbox but not sent yet (no deadline): they never left.
  for (const Outgoing& outgoing : loop.sending) {
    const auto found = statuses_.find(outgoing.id);
    if (found != statuses_.end() && found->second.state == CommandState::kPending) {
      finish(outgoing.id, CommandState::kRefused, nullptr, "not sent: the command channel failed (" + why + ")");
    }
  }
  loop.sending.clear();
}

void CommandClient::serve_once(Loop& loop) {
  if (options_.before_each_turn) options_.before_each_turn();
  send_submitted(loop);
  wait_for_replies(loop);
  take_acks(loop);
  expire_silent(loop);
}

void CommandClient::send_submitted(Loop& loop) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    loop.sending.swap(outbox_);
  }
  for (Outgoing& outgoing : loop.sending) {
    std::string error;
    std::unique_ptr<CommandSocket>& socket = loop.sockets[outgoing.command_endpoint];
    if (!socket) {
      try {
        socket = std::make_unique<CommandSocket>(outgoing.command_endpoint, options_.auth);
      } catch (const std::exception& failure) {
        error = failure.what();
      }
    }
    if (socket) socket->send(outgoing.command, error);
    if (!socket) loop.sockets.erase(outgoing.command_endpoint);
    std::lock_guard<std::mutex> lock(mutex_);
    if (!error.empty()) {
      finish(outgoing.id, CommandState::kRefused, nullptr, "not sent: " + error);
    } else if (statuses_.count(outgoing.id) != 0) {
      deadlines_[outgoing.id] =
          Clock::now() + std::chrono::duration_cast<Clock::duration>(
                             std::chrono::duration<double>(timeout_secs_of(outgoing.command)));
    }
  }
  loop.sending.clear();
}

void CommandClient::wait_for_replies(Loop& loop) {
  loop.items.clear();
  loop.polled.clear();
  for (auto& [endpoint, socket] : loop.sockets) {
    loop.items.push_back(zmq::pollitem_t{socket->socket().handle(), 0, ZMQ_POLLIN, 0});
    loop.polled.push_back(socket.get());
  }
  if (loop.items.empty()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(kPollMs));
  } else {
    try {
      zmq::poll(loop.items.data(), loop.items.size(), std::chrono::milliseconds(kPollMs));
    } catch (const zmq::error_t& error) {
      if (error.num() != EINTR) throw;   // to run(), which recovers
    }
  }
  for (CommandSocket* socket : loop.polled) socket->read_handshake_events();
}

void CommandClient::take_acks(Loop& loop) {
  for (size_t i = 0; i < loop.items.size(); ++i) {
    if (!(loop.items[i].revents & ZMQ_POLLIN)) continue;
    CommandSocket& socket = *loop.polled[i];
    while (true) {
      ReceiveResult reply = socket.receive(0);
      if (reply.status == ReceiveStatus::kTimeout || reply.status == ReceiveStatus::kInterrupted) {
        break;
      }
      const auto* ack = reply.status == ReceiveStatus::kMessage
                            ? std::get_if<keel::wire::Ack>(&reply.message)
                            : nullptr;
      if (ack == nullptr) continue;  // not an answer to a command of ours
      std::lock_guard<std::mutex> lock(mutex_);
      const std::optional<uint64_t> id = ack->id != 0 ? ack->id : only_unanswered(socket.endpoint());
      if (!id) continue;
      const auto found = statuses_.find(*id);
      if (found == statuses_.end() || found->second.command_endpoint != socket.endpoint()) {
        continue;
      }
      finish(*id, ack->ok ? CommandState::kAcknowledged : CommandState::kRefused, ack, ack->error);
    }
  }
}

std::optional<uint64_t> CommandClient::only_unanswered(const std::string& command_endpoint) {
  // The probe could not read the command it refuses; it is ours if exactly one of ours to
  // that endpoint is unanswered.
  int unanswered = 0;
  uint64_t id = 0;
  for (const auto& [pending_id, deadline] : deadlines_) {
    if (statuses_[pending_id].command_endpoint == command_endpoint) {
      ++unanswered;
      id = pending_id;
    }
  }
  if (unanswered != 1) return std::nullopt;
  return id;
}

void CommandClient::expire_silent(Loop& loop) {
  std::lock_guard<std::mutex> lock(mutex_);
  const Clock::time_point now = Clock::now();
  std::vector<uint64_t> expired;
  for (const auto& [id, deadline] : deadlines_) {
    if (deadline <= now) expired.push_back(id);
  }
  for (uint64_t id : expired) {
    const CommandStatus& status = statuses_[id];
    const auto socket = loop.sockets.find(status.command_endpoint);
    if (socket != loop.sockets.end() && !socket->second->refusal().empty()) {
      finish(id, CommandState::kRefused, nullptr, "not delivered: refused: " + socket->second->refusal());
      continue;
    }
    finish(id, CommandState::kTimedOut, nullptr,
           "no answer within " + seconds_text(timeout_secs_of(status.command)) +
               "; it may still be applied later, it is not resent" +
               (options_.auth.users_own ? "; or the run is not yours: its probe takes commands only with its "
                                          "owner's key, and refuses yours at the handshake"
                                        : ""));
  }
}

double CommandClient::timeout_secs_of(const keel::wire::Command& command) const {
  return command.kind == wire::command_kind::kDump ? options_.dump_timeout_secs : options_.timeout_secs;
}

}  // namespace keel::app
