#include "publisher.hpp"

#include <algorithm>
#include <string_view>
#include <variant>

#include <zmq.hpp>

#include "keel/probe/attach_error.hpp"
#include "keel/wire/codec.hpp"

namespace keel::probe {

struct Publisher::Socket {
  zmq::context_t context{1};
  std::unique_ptr<CurveGuard> guard;   // null without authentication
  zmq::socket_t socket;
};

namespace {
// How long the thread sleeps in poll when idle: bounds the added publish latency.
constexpr std::chrono::milliseconds kPollInterval{2};
// Without finish()'s deadline (a publisher destroyed without one), how long queued messages
// may still drain to subscribers.
constexpr int kLingerMs = 200;
// The largest frame a CURVE client needs to send: its handshake (INITIATE with its metadata),
// then subscriptions sealed with 33 bytes of overhead.
constexpr int64_t kCurveFrameBytes = 512;
}  // namespace

Publisher::Publisher(PublisherOptions options, wire::RunDescription description)
    : options_(std::move(options)),
      socket_(std::make_unique<Socket>()),
      ring_(std::max<size_t>(options_.queue_capacity, 1)),
      sent_description_(std::move(description)) {
  // Records published before any change are of these layers (the seq of a description a
  // subscriber is sent is its own; this copy has none: 0).
  layout_before_history_ = std::make_shared<const std::vector<char>>(wire::encode(sent_description_));
  bound_at_ = std::chrono::steady_clock::now();
  if (options_.endpoint.empty()) {
    thread_ = std::thread([this] { run(); });
    return;
  }
  try {
    if (!options_.secret_key.empty()) {
      // The handler must be bound before the socket it guards accepts a connection.
      socket_->guard = std::make_unique<CurveGuard>(socket_->context, options_.secret_key,
                                                    options_.allowed_client_keys, options_.refusal_report_interval);
    }
    open_socket(options_.endpoint);
    bound_endpoint_ = socket_->socket.get(zmq::sockopt::last_endpoint);
    bound_at_ = std::chrono::steady_clock::now();
  } catch (const zmq::error_t& e) {
    throw AttachError("keel probe: cannot bind telemetry socket to " + options_.endpoint + ": " +
                      e.what());
  }
  thread_ = std::thread([this] { run(); });
}

void Publisher::open_socket(const std::string& endpoint) {
  zmq::socket_t s(socket_->context, zmq::socket_type::xpub);
  s.set(zmq::sockopt::sndhwm, options_.send_high_water_mark);
  s.set(zmq::sockopt::linger, kLingerMs);
  // No ZMQ_XPUB_NODROP: with it a single full subscriber pipe refused each message for every
  // subscriber, so one frozen client starved the healthy ones. Without it ZeroMQ drops per
  // subscriber; that subscriber sees the loss as a seq gap (PROTOCOL §5), the others lose
  // nothing. `dropped` counts what the probe itself could not queue.
  // Every subscription and unsubscription reaches us (VERBOSER): each new client gets the run
  // description at once, and the subscriptions held are counted (take_subscriptions).
  s.set(zmq::sockopt::xpub_verboser, 1);
  // A longer subscription closes its connection before libzmq stores a byte of it. The limit
  // applies to every frame the peer sends, CURVE's handshake commands too (INITIATE is ~270
  // bytes), so an authenticated socket allows them: only its owner's clients get that far.
  const int64_t limit = socket_->guard ? std::max(options_.max_subscription_bytes, kCurveFrameBytes)
                                       : options_.max_subscription_bytes;
  s.set(zmq::sockopt::maxmsgsize, limit);
  if (socket_->guard) socket_->guard->guard(s);
  s.bind(endpoint);
  socket_->socket = std::move(s);
  live_subscriptions_ = 0;
  bound_ = true;
}

Publisher::~Publisher() { finish(std::chrono::steady_clock::now() + std::chrono::milliseconds(kLingerMs)); }

void Publisher::finish(std::chrono::steady_clock::time_point deadline) {
  if (finished_) return;
  finished_ = true;
  stop_.store(true);
  if (thread_.joinable()) thread_.join();   // after its last drain
  if (options_.endpoint.empty()) return;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  try {
    socket_->socket.set(zmq::sockopt::linger, static_cast<int>(std::max<int64_t>(0, left.count())));
  } catch (const zmq::error_t&) {
    // No socket (a reset whose bind failed): nothing is queued.
  }
  if (socket_->guard) socket_->guard->unguard(socket_->socket);
  socket_->socket.close();
  // The guard's own sockets live in the same context, which ends only once they are closed.
  socket_->guard.reset();
  // Returns once every connected subscriber has what was queued for it, or at the linger.
  socket_->context.close();
}

bool Publisher::take_refusals(std::vector<AuthRefusal>& out) {
  if (!socket_->guard) return false;
  return socket_->guard->take_refusals(out);
}

template <class T>
bool Publisher::enqueue(const T& message) {
  if (try_enqueue(message)) return true;
  // Its sequence number is still consumed (by the publisher thread, in send order), so
  // subscribers see the gap as well as the count.
  ring_dropped_.fetch_add(1, std::memory_order_release);
  return false;
}

template <class T>
bool Publisher::try_enqueue(const T& message) {
  const uint64_t head = head_.load(std::memory_order_relaxed);
  if (head - tail_.load(std::memory_order_acquire) >= ring_.size()) return false;
  auto& slot = ring_[head % ring_.size()];
  if (auto* same = std::get_if<T>(&slot)) {
    *same = message;   // reuses the slot's buffers: no allocation in steady state
  } else {
    slot = message;
  }
  head_.store(head + 1, std::memory_order_release);
  return true;
}

uint64_t Publisher::take_seq() {
  // Records the ring refused since the last message take their seqs first: the gap sits where
  // the publisher learnt of them, which is never later than the record that follows them.
  const uint64_t refused = ring_dropped_.load(std::memory_order_acquire);
  next_seq_ += refused - ring_drops_numbered_;
  ring_drops_numbered_ = refused;
  return next_seq_++;
}

template <class T>
void Publisher::publish_in_order(const T& message) {
  if (owed_description_) {
    if (!try_enqueue(*owed_description_)) {
      // The message belongs after the description: it is lost rather than read with the
      // layers of the one before.
      ring_dropped_.fetch_add(1, std::memory_order_release);
      return;
    }
    owed_description_.reset();
  }
  enqueue(message);
}

void Publisher::publish(const wire::StepRecord& record) { publish_in_order(record); }
void Publisher::publish(const wire::Event& event) { publish_in_order(event); }

void Publisher::describe(const wire::RunDescription& description) {
  // An older one still owed is replaced: no message was queued after it.
  owed_description_.reset();
  if (!try_enqueue(description)) owed_description_ = description;
}

std::vector<KeptMessage> Publisher::history() const {
  std::lock_guard<std::mutex> lock(history_mutex_);
  std::vector<KeptMessage> out;
  out.reserve(history_.size() + 1);
  // Only a history that spans a change needs to say which layers its oldest records have.
  const bool front_described = !history_.empty() && history_.front().first == std::string_view(wire::kTopicRun);
  if (history_descriptions_kept_ > 0 && !front_described) out.emplace_back(wire::kTopicRun, layout_before_history_);
  out.insert(out.end(), history_.begin(), history_.end());
  return out;
}

void Publisher::keep_in_history(const char* topic, Payload kept) {
  // Allocated outside the lock; a reader (history request, dump) may still hold the payload
  // that falls out of the ring, so it is never recycled in place.
  const bool is_step = topic == std::string_view(wire::kTopicStep);
  std::lock_guard<std::mutex> lock(history_mutex_);
  history_.emplace_back(topic, std::move(kept));
  ++(is_step ? history_steps_kept_ : history_descriptions_kept_);
  // history_steps records, and as many descriptions (a model re-planned at every step).
  while (history_steps_kept_ > options_.history_steps || history_descriptions_kept_ > options_.history_steps) {
    KeptMessage& front = history_.front();
    if (front.first == std::string_view(wire::kTopicStep)) {
      --history_steps_kept_;
    } else {
      layout_before_history_ = std::move(front.second);
      --history_descriptions_kept_;
    }
    history_.pop_front();
  }
}

std::vector<Publisher::Payload> Publisher::event_history() const {
  std::lock_guard<std::mutex> lock(history_mutex_);
  return {event_history_.begin(), event_history_.end()};
}

bool Publisher::send(const char* topic, const std::vector<char>& payload) {
  if (options_.endpoint.empty()) return true;   // nowhere to send: the tap is the reader
  auto& s = socket_->socket;
  try {
    const std::string_view topic_view(topic);
    if (!s.send(zmq::buffer(topic_view), zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
      return false;
    }
    s.send(zmq::buffer(payload), zmq::send_flags::dontwait);
    sent_.fetch_add(1, std::memory_order_relaxed);
    return true;
  } catch (const zmq::error_t&) {
    return false;
  }
}

void Publisher::send_description() {
  sent_description_.seq = take_seq();
  wire::encode(sent_description_, scratch_);
  if (!send(wire::kTopicRun, scratch_)) send_dropped_.fetch_add(1, std::memory_order_relaxed);
}

void Publisher::drain() {
  uint64_t tail = tail_.load(std::memory_order_relaxed);
  const uint64_t head = head_.load(std::memory_order_acquire);
  for (; tail < head; ++tail) {
    auto& slot = ring_[tail % ring_.size()];
    std::visit([this](auto& message) { message.seq = take_seq(); }, slot);
    if (auto* record = std::get_if<wire::StepRecord>(&slot)) record->dropped = dropped();
    if (const auto* description = std::get_if<wire::RunDescription>(&slot)) sent_description_ = *description;
    wire::encode(slot, scratch_);
    if (!send(wire::topic_of(slot), scratch_)) send_dropped_.fetch_add(1, std::memory_order_relaxed);
    // One shared copy serves the history ring and the tap; none is made when neither wants it.
    const bool is_event = std::holds_alternative<wire::Event>(slot);
    const bool kept = options_.history_steps > 0 && (!is_event || options_.history_events > 0);
    Payload payload;
    if (kept || options_.tap) payload = std::make_shared<const std::vector<char>>(scratch_);
    // Events are kept only beside a step ring: history requests are served only then.
    if (kept) {
      if (is_event) {
        std::lock_guard<std::mutex> lock(history_mutex_);
        if (event_history_.size() >= options_.history_events) event_history_.pop_front();
        event_history_.push_back(payload);
      } else {
        keep_in_history(wire::topic_of(slot), payload);
      }
    }
    if (options_.tap) options_.tap(slot, payload);
    tail_.store(tail + 1, std::memory_order_release);
  }
}

bool Publisher::take_subscriptions() {
  auto& s = socket_->socket;
  bool new_subscriber = false;
  zmq::message_t message;
  while (s.recv(message, zmq::recv_flags::dontwait)) {
    const auto* bytes = static_cast<const unsigned char*>(message.data());
    if (message.size() == 0) continue;
    const std::string_view topic(static_cast<const char*>(message.data()) + 1, message.size() - 1);
    const std::string_view intent_prefix(wire::kHistoryIntentPrefix);
    // A promise of a history request (HistoryIntents), not a reader of the stream.
    const bool intent = topic.substr(0, intent_prefix.size()) == intent_prefix;
    if (bytes[0] == 1) {
      ++live_subscriptions_;
      if (!intent) {
        new_subscriber = true;
      } else if (options_.history_intents) {
        options_.history_intents->announced(topic.substr(intent_prefix.size()));
      }
    } else if (bytes[0] == 0 && zmq_msg_gets(message.handle(), "Peer-Address") == nullptr &&
               zmq_msg_gets(message.handle(), "Socket-Type") == nullptr) {
      // libzmq's own unsubscription for each topic of a closed connection: it carries no peer
      // metadata. A peer's unsubscribe is not counted down: it may name a topic the peer
      // never held while its own stay in the trie, so believing it could hide unbounded growth.
      if (live_subscriptions_ > 0) --live_subscriptions_;
      // A client gone before it asked is not waited for.
      if (intent && options_.history_intents) options_.history_intents->withdrawn(topic.substr(intent_prefix.size()));
    }
    // Checked per message: a client that floods subscriptions keeps this loop reading, and
    // the trie must not outgrow the budget by more than one pipe's worth in the meantime.
    if (live_subscriptions_ > options_.max_subscriptions) {
      reset_connections();
      return false;
    }
  }
  return new_subscriber;
}

void Publisher::reset_connections() {
  subscription_resets_.fetch_add(1, std::memory_order_relaxed);
  // Nothing queued for the flooding connection is worth a linger; the old listener's port is
  // freed by ZeroMQ's reaper shortly after, so the bind may have to be tried again.
  socket_->socket.set(zmq::sockopt::linger, 0);
  if (socket_->guard) socket_->guard->unguard(socket_->socket);
  socket_->socket.close();
  bound_ = false;
  try {
    open_socket(bound_endpoint_);
  } catch (const zmq::error_t&) {
  }
}

void Publisher::run() {
  if (options_.endpoint.empty()) {
    // No socket to poll or describe to: the queue is drained for the tap alone.
    while (!stop_.load(std::memory_order_relaxed)) {
      drain();
      std::this_thread::sleep_for(kPollInterval);
    }
    drain();
    return;
  }
  auto next_describe = std::chrono::steady_clock::now();
  while (!stop_.load(std::memory_order_relaxed)) {
    bool new_subscriber = false;
    try {
      if (!bound_) open_socket(bound_endpoint_);
      zmq::pollitem_t items[3] = {{static_cast<void*>(socket_->socket), 0, ZMQ_POLLIN, 0}};
      const size_t polled = 1 + (socket_->guard ? socket_->guard->poll_items(items + 1) : 0);
      zmq::poll(items, polled, kPollInterval);
      if (socket_->guard) socket_->guard->service();
      new_subscriber = take_subscriptions();
    } catch (const zmq::error_t&) {
      // A socket error must not end telemetry; the next poll retries (an unbound socket after
      // a reset too: the bind is retried until the old listener has let the port go).
      if (!bound_) std::this_thread::sleep_for(kPollInterval);
    }
    const auto now = std::chrono::steady_clock::now();
    if (new_subscriber || now >= next_describe) {
      send_description();
      next_describe = now + options_.describe_interval;
    }
    drain();
  }
  drain();
}

}  // namespace keel::probe
