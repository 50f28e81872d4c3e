#include "command_server.hpp"

#include <algorithm>
#include <chrono>
#include <string_view>

#include <zmq.hpp>

#include "keel/probe/attach_error.hpp"
#include "keel/wire/codec.hpp"
#include "keel/wire/vocabulary.hpp"

namespace keel::probe {

struct CommandServer::Socket {
  zmq::context_t context{1};
  zmq::socket_t socket{context, zmq::socket_type::router};
};

namespace {
// How long the thread sleeps in poll when idle: bounds how late an ack leaves after the
// training thread answered (the round-trip target is one step plus 5 ms).
constexpr std::chrono::milliseconds kCommandPollInterval{2};
// ZeroMQ drops a peer that sends a larger frame before we ever see it, so an abusive client
// cannot make us buffer megabytes; between kMaxCommandBytes and this, we answer with an error.
constexpr int64_t kMaxFrameBytes = 1 << 20;
// Frames read of one request; the rest are drained and ignored (a request has 3).
constexpr size_t kMaxFrames = 8;
// Without finish()'s deadline, how long queued acks may still reach their clients.
constexpr int kAckLingerMs = 200;
// How long a history reply's client may take nothing before the reply is cut short (its ack
// says how many steps it got). The command thread serves everyone else meanwhile.
constexpr std::chrono::milliseconds kHistoryStallTimeout{1000};

// The step of an encoded step record (event) from the publisher's rings; -1 if it is not one.
template <class Message>
int64_t step_of_payload(const std::vector<char>& payload) {
  const wire::DecodeResult decoded = wire::decode(payload.data(), payload.size());
  const auto* message = decoded.ok ? std::get_if<Message>(&decoded.message) : nullptr;
  return message != nullptr ? message->step : -1;
}
int64_t step_of(const std::vector<char>& payload) { return step_of_payload<wire::StepRecord>(payload); }
int64_t event_step_of(const std::vector<char>& payload) { return step_of_payload<wire::Event>(payload); }
}  // namespace

std::string command_endpoint_of(const std::string& pub_endpoint) {
  if (pub_endpoint.empty()) return {};
  std::string derived = wire::command_endpoint_for(pub_endpoint);
  if (!derived.empty()) return derived;
  const bool tcp = pub_endpoint.rfind("tcp://", 0) == 0;
  const bool wildcard = pub_endpoint.size() > 2 && pub_endpoint.compare(pub_endpoint.size() - 2, 2, ":*") == 0;
  return tcp && wildcard ? pub_endpoint : std::string();
}

std::string check_command(const wire::Command& command, int32_t rank) {
  if (command.rank != -1 && command.rank != rank) {
    return "command is for rank " + std::to_string(command.rank) + ", this probe is rank " + std::to_string(rank);
  }
  if (command.kind == wire::command_kind::kSkip) {
    if (command.count < 1 || command.count > kMaxSkipCount) {
      return "skip count must be between 1 and " + std::to_string(kMaxSkipCount) + ", got " +
             std::to_string(command.count);
    }
    if (command.at_step < -1) {
      return "skip at_step must be a step (or -1 for the next), got " + std::to_string(command.at_step);
    }
    return {};
  }
  if (command.kind == wire::command_kind::kPolicy) {
    std::string known;
    for (const char* name : wire::kPolicyNames) {
      if (command.policy == name) return {};
      known += (known.empty() ? "" : ", ") + std::string(name);
    }
    return "unknown policy \"" + command.policy.substr(0, 64) + "\" (known: " + known + ")";
  }
  if (command.kind == wire::command_kind::kDump) {
    if (command.label.size() > kMaxLabelBytes) {
      return "dump label of " + std::to_string(command.label.size()) + " bytes exceeds the limit of " +
             std::to_string(kMaxLabelBytes);
    }
    return {};
  }
  if (command.kind == wire::command_kind::kHistory) {
    if (command.count < 1 || command.count > kMaxHistoryCount) {
      return "history count must be between 1 and " + std::to_string(kMaxHistoryCount) + ", got " +
             std::to_string(command.count);
    }
    return {};
  }
  if (command.kind == wire::command_kind::kDescribe) return {};
  if (command.kind == wire::command_kind::kRewind) {
    if (command.to_step < -1) {
      return "rewind to_step must be a step (or -1 for the newest snapshot), got " + std::to_string(command.to_step);
    }
    return {};
  }
  return "unknown command kind \"" + command.kind.substr(0, 64) +
         "\" (expected skip, dump, policy, history, describe or rewind)";
}

CommandServer::CommandServer(CommandServerOptions options)
    : options_(std::move(options)), socket_(std::make_unique<Socket>()) {
  options_.queue_capacity = std::max<size_t>(options_.queue_capacity, 1);
  auto& s = socket_->socket;
  try {
    if (!options_.secret_key.empty()) {
      // The handler must be bound before the socket it guards accepts a connection.
      guard_ = std::make_unique<CurveGuard>(socket_->context, options_.secret_key, options_.allowed_client_keys,
                                            options_.refusal_report_interval);
      guard_->guard(s);
    }
    s.set(zmq::sockopt::linger, kAckLingerMs);
    s.set(zmq::sockopt::maxmsgsize, kMaxFrameBytes);
    // An ack for a client that has gone away fails visibly instead of queueing forever.
    s.set(zmq::sockopt::router_mandatory, 1);
    // A history reply is thousands of messages, sent as its client takes them
    // (send_histories); one that stops reading is cut off after kHistoryStallTimeout.
    s.set(zmq::sockopt::sndhwm, options_.send_high_water_mark);
    s.bind(options_.endpoint);
    bound_endpoint_ = s.get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& e) {
    throw AttachError("keel probe: cannot bind command socket to " + options_.endpoint + ": " + e.what());
  }
  thread_ = std::thread([this] { run(); });
}

CommandServer::~CommandServer() { finish(std::chrono::steady_clock::now() + std::chrono::milliseconds(kAckLingerMs)); }

void CommandServer::finish(std::chrono::steady_clock::time_point deadline) {
  if (finished_) return;
  finished_ = true;
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  auto& s = socket_->socket;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  try {
    s.set(zmq::sockopt::linger, static_cast<int>(std::max<int64_t>(0, left.count())));
  } catch (const zmq::error_t&) {
    // Shutting down: the default linger stands.
  }
  if (guard_) guard_->unguard(s);
  s.close();
  // The guard's own sockets live in the same context, which ends only once they are closed.
  guard_.reset();
  // Returns once every client has what was queued for it, or at the linger.
  socket_->context.close();
}

bool CommandServer::take(std::vector<PendingCommand>& out) {
  out.clear();
  if (inbox_size_.load(std::memory_order_acquire) == 0) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  while (!inbox_.empty()) {
    out.push_back(std::move(inbox_.front()));
    inbox_.pop_front();
  }
  inbox_size_.store(0, std::memory_order_release);
  return !out.empty();
}

void CommandServer::reply(uint64_t ticket, const wire::Ack& ack) {
  try {
    // Cannot exceed queue_capacity: every ticket was admitted against that bound.
    std::lock_guard<std::mutex> lock(mutex_);
    outbox_.push_back(Reply{ticket, ack});
  } catch (const std::exception&) {
    // Out of memory for one small struct: the client times out rather than the run failing.
  }
}

bool CommandServer::send_ack(const std::string& identity, wire::Ack ack) {
  auto& s = socket_->socket;
  ack.rank = options_.rank;
  ack.run = options_.run;
  ack.model = options_.model;
  // A full pipe refuses the ack (the client times out, or a history reply tries again next
  // turn) rather than stalling every other client.
  const auto flags = zmq::send_flags::dontwait;
  try {
    ack.seq = next_seq_;
    const std::vector<char> payload = wire::encode(ack);
    const std::string_view topic(wire::kTopicAck);
    if (!s.send(zmq::buffer(identity), zmq::send_flags::sndmore | flags)) return false;
    ++next_seq_;
    s.send(zmq::buffer(topic), zmq::send_flags::sndmore | flags);
    s.send(zmq::buffer(payload), flags);
    return true;
  } catch (const zmq::error_t&) {
    // The client disconnected (EHOSTUNREACH) or stopped reading: nobody is left to tell.
    return true;
  }
}

void CommandServer::start_history(const std::string& identity, const wire::Command& command) {
  wire::Ack ack;
  ack.id = command.id;
  if (!options_.history) {
    ack.error = "this probe keeps no history (it publishes no telemetry or its ring size is 0)";
    return (void)send_ack(identity, ack);
  }
  if (histories_.size() >= kMaxHistoryReplies) {
    ack.error = "busy: " + std::to_string(histories_.size()) + " history answers are being sent";
    return (void)send_ack(identity, ack);
  }
  std::vector<KeptMessage> kept = options_.history();
  auto is_step = [](const KeptMessage& m) { return m.first == std::string_view(wire::kTopicStep); };
  // From the count-th newest record on, with the descriptions between the records.
  size_t first = kept.size();
  for (int64_t steps = 0; first > 0 && steps < command.count;) {
    if (is_step(kept[--first])) ++steps;
  }
  const bool whole_ring = std::none_of(kept.begin(), kept.begin() + static_cast<std::ptrdiff_t>(first), is_step);
  if (whole_ring) first = 0;
  HistoryReply reply;
  reply.identity = identity;
  reply.ack = ack;
  reply.ack.ok = true;
  // The layers the first record sent was published under, when the ring spans a change: the
  // newest description before it.
  for (size_t i = first; i-- > 0;) {
    if (is_step(kept[i])) continue;
    reply.messages.push_back(std::move(kept[i]));
    break;
  }
  for (size_t i = first; i < kept.size(); ++i) reply.messages.push_back(std::move(kept[i]));
  reply.records = reply.messages.size();
  // The events follow: all the probe keeps when the whole ring was asked for (the first
  // non-finite gradient may be older than every step kept), else those of the steps sent.
  if (options_.event_history) {
    int64_t since = 0;
    if (!whole_ring) {
      const auto oldest = std::find_if(reply.messages.begin(), reply.messages.end(), is_step);
      if (oldest != reply.messages.end()) since = step_of(*oldest->second);
    }
    for (auto& event : options_.event_history()) {
      if (!whole_ring && event_step_of(*event) < since) continue;
      reply.messages.emplace_back(wire::kTopicEvent, std::move(event));
    }
  }
  reply.last_progress = std::chrono::steady_clock::now();
  histories_.push_back(std::move(reply));
  histories_in_flight_.store(histories_.size(), std::memory_order_release);
}

void CommandServer::send_histories() {
  auto& s = socket_->socket;
  const auto now = std::chrono::steady_clock::now();
  for (auto it = histories_.begin(); it != histories_.end();) {
    HistoryReply& r = *it;
    bool gone = false;
    try {
      while (r.next < r.messages.size()) {
        const auto& [topic, payload] = r.messages[r.next];
        // The client's pipe is full: the rest waits for the next turn.
        if (!s.send(zmq::buffer(r.identity), zmq::send_flags::sndmore | zmq::send_flags::dontwait)) break;
        s.send(zmq::buffer(std::string_view(topic)), zmq::send_flags::sndmore);
        s.send(zmq::buffer(payload->data(), payload->size()), zmq::send_flags::none);
        ++r.next;
        r.last_progress = now;
      }
    } catch (const zmq::error_t&) {
      gone = true;   // the client went away (EHOSTUNREACH): nobody is left to tell
    }
    const bool stalled = now - r.last_progress >= kHistoryStallTimeout;
    if (!gone && r.next < r.messages.size() && !stalled) {
      ++it;
      continue;
    }
    // Complete or cut short: the ack says how many steps went out. Behind thousands of
    // messages the client's pipe may still be full: the ack waits its turn like them.
    int64_t steps_sent = 0;
    const std::vector<char>* newest_sent = nullptr;
    for (size_t i = 0; i < std::min(r.next, r.records); ++i) {
      if (r.messages[i].first != std::string_view(wire::kTopicStep)) continue;
      ++steps_sent;
      newest_sent = r.messages[i].second.get();
    }
    r.ack.count = steps_sent;
    if (newest_sent != nullptr) r.ack.step = step_of(*newest_sent);
    r.messages.resize(r.next);   // nothing more of it goes out
    if (!gone && !send_ack(r.identity, r.ack) && !stalled) {
      ++it;
      continue;
    }
    it = histories_.erase(it);
  }
  histories_in_flight_.store(histories_.size(), std::memory_order_release);
}

void CommandServer::handle(std::vector<std::string>& frames) {
  const std::string& identity = frames[0];
  wire::Ack refusal;
  if (frames.size() != 3) {
    refusal.error = "expected 2 frames (topic, payload), got " + std::to_string(frames.size() - 1);
    return (void)send_ack(identity, refusal);
  }
  if (frames[1] != wire::kTopicCommand) {
    refusal.error = "topic must be \"cmd\", got \"" + frames[1].substr(0, 32) + "\"";
    return (void)send_ack(identity, refusal);
  }
  const std::string& payload = frames[2];
  if (payload.size() > kMaxCommandBytes) {
    refusal.error = "command of " + std::to_string(payload.size()) + " bytes exceeds the limit of " +
                    std::to_string(kMaxCommandBytes) + " bytes";
    return (void)send_ack(identity, refusal);
  }
  wire::DecodeResult decoded = wire::decode(payload.data(), payload.size());
  if (!decoded.ok) {
    refusal.error = "malformed command: " + decoded.error;
    return (void)send_ack(identity, refusal);
  }
  auto* command = std::get_if<wire::Command>(&decoded.message);
  if (command == nullptr) {
    refusal.error = std::string("expected a cmd message, got ") + wire::topic_of(decoded.message);
    return (void)send_ack(identity, refusal);
  }
  refusal.id = command->id;
  refusal.error = check_command(*command, options_.rank);
  if (command->kind == wire::command_kind::kHistory) {
    // History needs no model state: answered here, whatever the training loop does.
    if (refusal.error.empty()) {
      start_history(identity, *command);
    } else {
      send_ack(identity, refusal);
    }
    // The request its client announced has come, and its answer is queued (counted by
    // histories_in_flight() until it is all with the socket): a probe that is ending may go
    // once that is sent.
    if (options_.history_intents) options_.history_intents->asked(command->token);
    return;
  }
  if (!refusal.error.empty()) return (void)send_ack(identity, refusal);
  if (clients_.size() >= options_.queue_capacity) {
    refusal.error = "busy: " + std::to_string(clients_.size()) + " commands are already waiting";
    return (void)send_ack(identity, refusal);
  }
  const uint64_t ticket = next_ticket_++;
  clients_.emplace_back(ticket, identity);
  std::lock_guard<std::mutex> lock(mutex_);
  inbox_.push_back(PendingCommand{ticket, std::move(*command)});
  inbox_size_.store(inbox_.size(), std::memory_order_release);
}

void CommandServer::receive_all() {
  auto& s = socket_->socket;
  std::vector<std::string> frames;
  zmq::message_t frame;
  while (s.recv(frame, zmq::recv_flags::dontwait)) {
    frames.clear();
    frames.emplace_back(frame.data<char>(), frame.size());
    size_t count = 1;
    while (frame.more()) {
      if (!s.recv(frame, zmq::recv_flags::none)) break;   // the rest of a message is already here
      if (++count <= kMaxFrames) frames.emplace_back(frame.data<char>(), frame.size());
    }
    // Frames past kMaxFrames were drained, not kept; the count still makes the request invalid.
    if (count > frames.size()) frames.resize(std::min(count, kMaxFrames + 1));
    handle(frames);
  }
}

void CommandServer::send_replies() {
  std::deque<Reply> replies;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    replies.swap(outbox_);
  }
  for (Reply& reply : replies) {
    const auto it = std::find_if(clients_.begin(), clients_.end(),
                                 [&](const auto& client) { return client.first == reply.ticket; });
    if (it == clients_.end()) continue;
    send_ack(it->second, std::move(reply.ack));
    clients_.erase(it);
  }
}

bool CommandServer::take_refusals(std::vector<AuthRefusal>& out) {
  if (!guard_) return false;
  return guard_->take_refusals(out);
}

void CommandServer::run() {
  auto& s = socket_->socket;
  while (!stop_.load(std::memory_order_relaxed)) {
    try {
      zmq::pollitem_t items[3] = {{static_cast<void*>(s), 0, ZMQ_POLLIN, 0}};
      const size_t polled = 1 + (guard_ ? guard_->poll_items(items + 1) : 0);
      zmq::poll(items, polled, kCommandPollInterval);
      if (guard_) guard_->service();
      receive_all();
      send_replies();
      send_histories();
    } catch (const std::exception&) {
      // A socket error must not end the command channel; the next poll retries.
    }
  }
  // Answers the training thread gave before shutdown still reach their clients (linger).
  try {
    send_replies();
  } catch (const std::exception&) {
    // Shutting down: a client that misses its ack times out, as it would had we crashed.
  }
}

}  // namespace keel::probe
