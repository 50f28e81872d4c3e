// CommandServer: the probe's command socket (ROUTER) and the thread that owns it.
//
// What it is for: a client (keel-cli send, the dashboard) sends wire::Command messages; this
// thread checks what it can without the model (decodes, size, rank, kind, argument ranges)
// and answers a malformed or unsupported command at once with Ack{ok=false}. A valid command
// is queued for the training thread, which applies it at its next step boundary and answers
// through reply(); this thread then sends that Ack to the client identity that asked.
// A history request's token (PROTOCOL §6) is handed to CommandServerOptions::history_intents,
// so a probe that is ending knows the request it waited for has come.
// Threads: take() and finish() from the training thread only; reply() from the training thread
// and from the dump writer's thread (a dump's ack is sent when its files are written), under a
// mutex; histories_in_flight() from any; the socket and everything about client identities
// belong to the command thread until finish().
// Never: touches tensors or the model; blocks the training thread on the socket (take() is a
// try-pop that skips the lock while nothing is queued, reply() only pushes under a mutex that
// the command thread holds for a few instructions); grows without bound (a command that
// would exceed `queue_capacity` outstanding commands is refused with "busy"); throws from
// take() or reply(); waits on the network past finish()'s deadline (the destructor's: a short
// linger).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "curve_guard.hpp"
#include "history_intents.hpp"
#include "keel/wire/messages.hpp"
#include "kept_message.hpp"

namespace keel::probe {

// Largest accepted command payload. Real commands are a few dozen bytes; anything bigger is
// refused without being parsed.
inline constexpr size_t kMaxCommandBytes = 64u << 10;
// Largest `count` of one skip command, and of skips pending at once: a typo such as 1000000
// must not silently freeze a run for a day.
inline constexpr int64_t kMaxSkipCount = 10000;
// How far ahead an at_step skip may be scheduled: a typo of a few digits is refused, not
// kept for days.
inline constexpr int64_t kMaxSkipLead = 1000000;
// Largest `count` of a history request (all of any ring the probe can be configured with).
inline constexpr int64_t kMaxHistoryCount = int64_t{1} << 20;
// History answers in progress at once; another request is refused as busy.
inline constexpr size_t kMaxHistoryReplies = 8;
// Longest dump label accepted (it is sanitised and cut to 64 characters for the file name).
inline constexpr size_t kMaxLabelBytes = 256;

struct CommandServerOptions {
  std::string endpoint;          // where to bind the ROUTER socket; may have a wildcard port
  int32_t rank = 0;              // commands for another rank are refused
  std::string run;               // the run's id and model, stamped on every ack (PROTOCOL §5)
  std::string model;
  size_t queue_capacity = 64;    // commands taken but not yet answered, at most
  // Messages queued for one client before it must read (a history answer goes out as it does).
  int send_high_water_mark = 20000;
  // The publisher's ring of encoded step records, with the run descriptions between them,
  // oldest first (Publisher::history(); called on the command thread); empty: history
  // requests are refused.
  std::function<std::vector<KeptMessage>()> history;
  // The publisher's ring of encoded events, oldest first (command thread); sent with every
  // history answer, after its steps. Empty: none are sent.
  std::function<std::vector<std::shared_ptr<const std::vector<char>>>()> event_history;
  // Command authentication (CURVE): the server's Z85 secret key, and the Z85 public keys of the
  // clients allowed to connect. "" = no authentication.
  std::string secret_key;
  std::vector<std::string> allowed_client_keys;
  // take_refusals() hands over the first refusal at once and then at most one report per
  // interval, the attempts in between folded into it: a client of another user that keeps
  // reconnecting is one event a minute, not one every few steps that would push the run's own
  // events out of the probe's ring.
  std::chrono::milliseconds refusal_report_interval{60000};
  // Told of the token of every history request; null: ignored.
  std::shared_ptr<HistoryIntents> history_intents;
};

// A command that passed the command thread's checks, with an opaque ticket that routes the
// answer back to its client.
struct PendingCommand {
  uint64_t ticket = 0;
  wire::Command command;
};

// Where a probe publishing on `pub_endpoint` takes commands: its port + 1. A wildcard tcp
// port has no "next port", so the command socket takes a wildcard port of its own on the same
// host; "" (no command socket) for "" and for other endpoints without a port (ipc://).
std::string command_endpoint_of(const std::string& pub_endpoint);

// Checks that need no model state. Returns "" when `command` may go to the training thread,
// else the refusal sentence sent in the Ack.
std::string check_command(const wire::Command& command, int32_t rank);

class CommandServer {
 public:
  // Binds the socket and starts the thread; throws AttachError when the bind fails.
  explicit CommandServer(CommandServerOptions options);
  // finish() with a short linger, unless it was called.
  ~CommandServer();
  CommandServer(const CommandServer&) = delete;
  CommandServer& operator=(const CommandServer&) = delete;

  // Moves every queued command into `out` (cleared first); false when none was waiting.
  bool take(std::vector<PendingCommand>& out);
  // The training thread's answer to a command returned by take(). Sent within a few ms.
  void reply(uint64_t ticket, const wire::Ack& ack);
  // Clients refused by authentication since the last report, when one is due
  // (CommandServerOptions::refusal_report_interval); false when none is. Training thread.
  bool take_refusals(std::vector<AuthRefusal>& out);

  const std::string& bound_endpoint() const { return bound_endpoint_; }
  // History answers still being handed to their clients' sockets.
  size_t histories_in_flight() const { return histories_in_flight_.load(std::memory_order_acquire); }
  // Stops the thread, sends the acks the training thread gave, and closes the socket, which
  // delivers what it queued until `deadline` at most (exit_flush.hpp).
  void finish(std::chrono::steady_clock::time_point deadline);

 private:
  struct Reply {
    uint64_t ticket = 0;
    wire::Ack ack;
  };
  // A history answer in progress: sent a few messages at a time between the other work of the
  // command thread, never waiting on its client, so a slow reader delays no one's ack.
  struct HistoryReply {
    std::string identity;
    wire::Ack ack;   // its id; count and step as steps go out
    std::vector<KeptMessage> messages;
    size_t records = 0;   // messages[0, records) are step records and descriptions, the rest events
    size_t next = 0;
    std::chrono::steady_clock::time_point last_progress;
  };
  struct Socket;

  void run();
  void receive_all();
  void handle(std::vector<std::string>& frames);
  // Never waits: false when the client's pipe is full (the ack is not sent).
  bool send_ack(const std::string& identity, wire::Ack ack);
  void start_history(const std::string& identity, const wire::Command& command);
  // Sends what the history replies' clients take now; ends a reply when it is complete or
  // its client took nothing for kHistoryStallTimeout.
  void send_histories();
  void send_replies();

  CommandServerOptions options_;
  std::unique_ptr<Socket> socket_;
  std::string bound_endpoint_;

  std::mutex mutex_;                        // guards inbox_ and outbox_
  std::deque<PendingCommand> inbox_;        // command thread -> training thread
  std::deque<Reply> outbox_;                // training thread -> command thread
  std::atomic<size_t> inbox_size_{0};       // lets take() skip the lock when idle
  // Command thread only: who asked, per outstanding ticket (bounded by queue_capacity).
  std::vector<std::pair<uint64_t, std::string>> clients_;
  uint64_t next_ticket_ = 1;
  uint64_t next_seq_ = 0;
  std::deque<HistoryReply> histories_;      // command thread; at most kMaxHistoryReplies
  std::atomic<size_t> histories_in_flight_{0};   // histories_.size(), for any thread

  std::unique_ptr<CurveGuard> guard_;       // null without authentication
  std::atomic<bool> stop_{false};
  bool finished_ = false;                   // training thread
  std::thread thread_;
};

}  // namespace keel::probe
