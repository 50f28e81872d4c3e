#include "publisher.hpp"

#include <variant>

#include <zmq.hpp>

#include "keel/probe/probe.hpp"
#include "keel/wire/codec.hpp"

namespace keel::probe {

struct Publisher::Socket {
  zmq::context_t context{1};
  zmq::socket_t socket{context, zmq::socket_type::xpub};
};

namespace {
// How long the thread sleeps in poll when idle: bounds the added publish latency.
constexpr std::chrono::milliseconds kPollInterval{2};
// On shutdown, how long queued messages may still drain to subscribers.
constexpr int kLingerMs = 200;
}  // namespace

Publisher::Publisher(PublisherOptions options, wire::RunDescription description)
    : options_(std::move(options)),
      socket_(std::make_unique<Socket>()),
      ring_(std::max<size_t>(options_.queue_capacity, 1)),
      description_(std::move(description)) {
  auto& s = socket_->socket;
  try {
    s.set(zmq::sockopt::sndhwm, options_.send_high_water_mark);
    s.set(zmq::sockopt::linger, kLingerMs);
    // No ZMQ_XPUB_NODROP: with it a single full subscriber pipe refused each message for every
    // subscriber, so one frozen client starved the healthy ones. Without it ZeroMQ drops per
    // subscriber; that subscriber sees the loss as a seq gap (PROTOCOL §5), the others lose
    // nothing. `dropped` counts what the probe itself could not queue.
    // Every subscription reaches us, so each new client gets the run description at once.
    s.set(zmq::sockopt::xpub_verbose, 1);
    s.bind(options_.endpoint);
    bound_endpoint_ = s.get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& e) {
    throw AttachError("keel probe: cannot bind telemetry socket to " + options_.endpoint + ": " +
                      e.what());
  }
  thread_ = std::thread([this] { run(); });
}

Publisher::~Publisher() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

template <class T>
void Publisher::enqueue(const T& message) {
  const uint64_t head = head_.load(std::memory_order_relaxed);
  if (head - tail_.load(std::memory_order_acquire) >= ring_.size()) {
    // Its sequence number is still consumed (by the publisher thread, in send order), so
    // subscribers see the gap as well as the count.
    ring_dropped_.fetch_add(1, std::memory_order_release);
    return;
  }
  auto& slot = ring_[head % ring_.size()];
  if (auto* same = std::get_if<T>(&slot)) {
    *same = message;   // reuses the slot's buffers: no allocation in steady state
  } else {
    slot = message;
  }
  head_.store(head + 1, std::memory_order_release);
}

uint64_t Publisher::take_seq() {
  // Records the ring refused since the last message take their seqs first: the gap sits where
  // the publisher learnt of them, which is never later than the record that follows them.
  const uint64_t refused = ring_dropped_.load(std::memory_order_acquire);
  next_seq_ += refused - ring_drops_numbered_;
  ring_drops_numbered_ = refused;
  return next_seq_++;
}

void Publisher::publish(const wire::StepRecord& record) { enqueue(record); }
void Publisher::publish(const wire::Event& event) { enqueue(event); }

void Publisher::describe(const wire::RunDescription& description) {
  std::lock_guard<std::mutex> lock(description_mutex_);
  description_ = description;
  description_changed_.store(true);
}

std::vector<Publisher::Payload> Publisher::history() const {
  std::lock_guard<std::mutex> lock(history_mutex_);
  return {history_.begin(), history_.end()};
}

std::vector<Publisher::Payload> Publisher::event_history() const {
  std::lock_guard<std::mutex> lock(history_mutex_);
  return {event_history_.begin(), event_history_.end()};
}

bool Publisher::send(const char* topic, const std::vector<char>& payload) {
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
  wire::RunDescription description;
  {
    std::lock_guard<std::mutex> lock(description_mutex_);
    description = description_;
  }
  description.seq = take_seq();
  wire::encode(description, scratch_);
  if (!send(wire::kTopicRun, scratch_)) send_dropped_.fetch_add(1, std::memory_order_relaxed);
}

void Publisher::drain() {
  uint64_t tail = tail_.load(std::memory_order_relaxed);
  const uint64_t head = head_.load(std::memory_order_acquire);
  for (; tail < head; ++tail) {
    auto& slot = ring_[tail % ring_.size()];
    std::visit([this](auto& message) { message.seq = take_seq(); }, slot);
    if (auto* record = std::get_if<wire::StepRecord>(&slot)) record->dropped = dropped();
    wire::encode(slot, scratch_);
    if (!send(wire::topic_of(slot), scratch_)) send_dropped_.fetch_add(1, std::memory_order_relaxed);
    // Events are kept only beside a step ring: history requests are served only then.
    const bool is_step = std::holds_alternative<wire::StepRecord>(slot);
    const bool is_event = std::holds_alternative<wire::Event>(slot);
    const size_t keep = options_.history_steps == 0 ? 0
                        : is_step                    ? options_.history_steps
                        : is_event                   ? options_.history_events
                                                     : 0;
    if (keep > 0) {
      // Allocated outside the lock; a reader (history request, dump) may still hold the
      // payload that falls out of the ring, so it is never recycled in place.
      Payload payload = std::make_shared<const std::vector<char>>(scratch_);
      std::lock_guard<std::mutex> lock(history_mutex_);
      std::deque<Payload>& ring = is_step ? history_ : event_history_;
      if (ring.size() >= keep) ring.pop_front();
      ring.push_back(std::move(payload));
    }
    tail_.store(tail + 1, std::memory_order_release);
  }
}

void Publisher::run() {
  auto& s = socket_->socket;
  auto next_describe = std::chrono::steady_clock::now();
  zmq::message_t subscription;
  while (!stop_.load(std::memory_order_relaxed)) {
    bool new_subscriber = false;
    try {
      zmq::pollitem_t item{static_cast<void*>(s), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, kPollInterval);
      while (s.recv(subscription, zmq::recv_flags::dontwait)) {
        const auto* bytes = static_cast<const unsigned char*>(subscription.data());
        if (subscription.size() > 0 && bytes[0] == 1) new_subscriber = true;
      }
    } catch (const zmq::error_t&) {
      // A socket error must not end telemetry; the next poll retries.
    }
    const auto now = std::chrono::steady_clock::now();
    if (new_subscriber || description_changed_.exchange(false) || now >= next_describe) {
      send_description();
      next_describe = now + options_.describe_interval;
    }
    drain();
  }
  drain();
}

}  // namespace keel::probe
