// keel app CommandClient: the dashboard's command thread (skip, dump, policy to the probes).
//
// What it is for: the UI must never touch a socket, yet the user's clicks must reach the
// probe and their answers come back. submit() queues a command and returns its id at once; a
// background thread owns one DEALER (CommandSocket) per command endpoint, sends, matches each
// ack to its command by id, and marks a command timed out when no ack came in time. The UI
// reads status(id) every frame.
// A command is sent exactly once: a timed-out command is never resent (PROTOCOL §6: a skip
// must not be applied twice). An ack that arrives after the timeout still updates the status
// (answered_late), because the probe did apply it and the user must see that.
// Threads: construct, submit(), status() and the destructor from one owner thread (the UI
// thread); the background thread is private. submit() and status() take a short lock and never
// wait on the network.
// Never: blocks the owner, throws after construction, or grows without bound: the statuses of
// the newest kMaxKept commands are kept. Destruction stops the thread within one poll interval.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "keel/wire/messages.hpp"
#include "net/client_auth.hpp"
#include "values/command_status.hpp"

namespace keel::app {

struct CommandClientOptions {
  // Skip and policy take effect at the next step boundary: one step, normally well under a
  // second, seconds for a large model.
  double timeout_secs = 10.0;
  // A dump writes the whole model and optimizer state before it is acknowledged.
  double dump_timeout_secs = 120.0;
  // The keys to present (keel passes ClientAuth::from_options: the user's own unless told). A
  // command whose handshake the probe refuses is never delivered: it ends refused, saying why.
  ClientAuth auth;
  // Fault injection for tests: called on the command thread at the start of each turn; an
  // exception it throws is handled as a socket failure in that turn would be.
  std::function<void()> before_each_turn;
};

class CommandClient {
 public:
  static constexpr size_t kMaxKept = 256;

  explicit CommandClient(CommandClientOptions options = {});
  CommandClient(const CommandClient&) = delete;
  CommandClient& operator=(const CommandClient&) = delete;
  ~CommandClient();

  // Queues `command` for the probe whose command socket is `command_endpoint` (for a telemetry
  // endpoint E: keel::wire::command_endpoint_for(E)). The id is chosen here (command.id is
  // overwritten) and returned. An empty or unusable endpoint comes back as kRefused.
  uint64_t submit(const std::string& command_endpoint, keel::wire::Command command);

  // The command's status, or nothing for an id not submitted here (or no longer kept).
  std::optional<CommandStatus> status(uint64_t id) const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Outgoing {
    uint64_t id;
    std::string command_endpoint;
    keel::wire::Command command;
  };

  struct Loop;
  void run();
  // One turn of the thread: sends what was submitted, takes acks, times out the silent.
  void serve_once(Loop& loop);
  // serve_once()'s parts, in order. The outbox's commands sent, each with its deadline (or
  // refused when its socket could not be made or it could not be sent).
  void send_submitted(Loop& loop);
  // Polls every socket for at most kPollMs (sleeps as long when there is none).
  void wait_for_replies(Loop& loop);
  // The acks that came, each finishing the command it answers.
  void take_acks(Loop& loop);
  // Commands past their deadline: refused when their probe refused the handshake, else timed out.
  void expire_silent(Loop& loop);
  // The one command to `command_endpoint` still unanswered, if exactly one is: whose an
  // ack with id 0 (a command the probe could not read) is. Called with mutex_ held.
  std::optional<uint64_t> only_unanswered(const std::string& command_endpoint);
  // How long `command` waits for its ack: options_.timeout_secs, or dump_timeout_secs for a dump.
  double timeout_secs_of(const keel::wire::Command& command) const;
  // A turn failed (a socket error): its sockets are dropped and the commands in flight end
  // as timed out, saying why; the thread goes on with fresh sockets.
  void channel_failed(Loop& loop, const std::string& why);
  // Called with mutex_ held.
  void finish(uint64_t id, CommandState state, const keel::wire::Ack* ack, const std::string& error);

  CommandClientOptions options_;
  std::atomic<bool> stop_{false};
  mutable std::mutex mutex_;  // guards everything below
  uint64_t next_id_;
  std::vector<Outgoing> outbox_;
  std::map<uint64_t, CommandStatus> statuses_;
  std::deque<uint64_t> kept_order_;  // ids in submission order, for the bound
  std::map<uint64_t, Clock::time_point> deadlines_;  // pending ids
  std::thread thread_;
};

}  // namespace keel::app
