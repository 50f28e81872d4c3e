#include "net/receiver.hpp"

#include <algorithm>
#include <utility>
#include <variant>

#include "keel/wire/codec.hpp"
#include "net/late_attach.hpp"
#include "net/message_bytes.hpp"
#include "net/subscriber.hpp"

namespace keel::app {
namespace {

// One round over all sockets waits at most this long in total, which bounds both the latency
// of a new message and how long the destructor waits for the thread.
constexpr int kRoundWaitMs = 20;
// Messages taken from one socket before looking at the others, so a chatty rank cannot starve
// a quiet one.
constexpr int kBurstPerSocket = 256;

bool is_version_error(const std::string& error) {
  return error.find("protocol version") != std::string::npos;
}

}  // namespace

Receiver::Receiver(const std::vector<std::string>& endpoints, ReceiverOptions options)
    : options_(options) {
  // Sockets are created here so a bad endpoint throws to the caller; they are then handed to
  // the thread, which is their only user from then on.
  std::vector<Subscriber> subscribers;
  std::vector<LateAttach> attaches;
  subscribers.reserve(endpoints.size());
  for (const std::string& endpoint : endpoints) {
    attaches.emplace_back(keel::wire::command_endpoint_for(endpoint), options_.backfill_options, options_.auth);
    // Announces the history request to come, so a probe that ends meanwhile waits for it.
    subscribers.emplace_back(std::vector<std::string>{endpoint}, options_.auth,
                             options_.backfill ? attaches.back().history_token() : std::string());
    Link link;
    link.endpoint = endpoint;
    links_.push_back(std::move(link));
  }
  thread_ = std::thread([this, subs = std::move(subscribers), attach = std::move(attaches)]() mutable {
    std::vector<keel::wire::Message> released;
    const int wait_ms = std::max<int>(1, kRoundWaitMs / std::max<int>(1, int(subs.size())));
    while (!stop_.load()) {
      for (size_t i = 0; i < subs.size() && !stop_.load(); ++i) {
        bool queued = false;
        for (int n = 0; n < kBurstPerSocket; ++n) {
          ReceiveResult result = subs[i].receive(n == 0 ? wait_ms : 0);
          // Only this thread writes a link: it may read one without the lock.
          if (n == 0 && subs[i].refusal() != links_[i].refusal) {
            std::lock_guard<std::mutex> lock(mutex_);
            links_[i].refusal = subs[i].refusal();
          }
          if (result.status == ReceiveStatus::kTimeout) break;
          if (result.status == ReceiveStatus::kInterrupted) break;
          std::lock_guard<std::mutex> lock(mutex_);
          Link& link = links_[i];
          if (result.status == ReceiveStatus::kDecodeError) {
            ++link.decode_errors;
            link.last_error = result.error;
            if (is_version_error(result.error)) link.version_error_since_message = true;
            continue;
          }
          ++link.messages;
          link.last_message = Clock::now();
          // Where commands for this rank go (the controls send to the rank they show).
          link.rank = std::visit([](const auto& m) { return m.rank; }, result.message);
          link.version_error_since_message = false;
          if (!options_.backfill) {
            push(std::move(result.message));
            queued = true;
            continue;
          }
          released.clear();
          attach[i].on_live(std::move(result.message), released);
          for (keel::wire::Message& message : released) push(std::move(message));
          queued = queued || !released.empty();
        }
        if (options_.backfill) {
          released.clear();
          attach[i].poll(released);
          std::lock_guard<std::mutex> lock(mutex_);
          backfill_allowance_ += released.size();
          for (keel::wire::Message& message : released) push(std::move(message));
          queued = queued || !released.empty();
          links_[i].backfill = attach[i].backfill().status();
          links_[i].backfill_outcomes = attach[i].backfill().outcomes();
        }
        // Once per burst, outside the lock: the UI drains the whole queue when it wakes.
        if (queued && options_.on_data) options_.on_data();
      }
    }
  });
}

Receiver::~Receiver() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

// Called with mutex_ held.
void Receiver::push(keel::wire::Message&& message) {
  if (queue_.size() >= options_.queue_capacity + backfill_allowance_) {
    queued_bytes_ -= std::min(queued_bytes_, message_bytes(queue_.front()));
    queue_.pop_front();
    queue_dropped_.fetch_add(1);
  }
  queued_bytes_ += message_bytes(message);
  queue_.push_back(std::move(message));
  while (queued_bytes_ > options_.queue_bytes && queue_.size() > 1) {
    queued_bytes_ -= std::min(queued_bytes_, message_bytes(queue_.front()));
    queue_.pop_front();
    queue_dropped_.fetch_add(1);
  }
}

void Receiver::drain(std::vector<keel::wire::Message>& out) {
  std::deque<keel::wire::Message> taken;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    taken.swap(queue_);
    backfill_allowance_ = 0;
    queued_bytes_ = 0;
  }
  out.reserve(out.size() + taken.size());
  for (keel::wire::Message& message : taken) out.push_back(std::move(message));
}

std::vector<EndpointState> Receiver::endpoint_states() const {
  const Clock::time_point now = Clock::now();
  std::vector<EndpointState> states;
  std::lock_guard<std::mutex> lock(mutex_);
  for (const Link& link : links_) {
    EndpointState state;
    state.endpoint = link.endpoint;
    state.messages = link.messages;
    state.decode_errors = link.decode_errors;
    state.last_error = link.last_error;
    state.refusal = link.refusal;
    state.backfill = link.backfill;
    state.backfill_outcomes = link.backfill_outcomes;
    state.rank = link.rank;
    if (link.messages > 0) {
      state.secs_since_message = std::chrono::duration<double>(now - link.last_message).count();
    }
    const bool silent = link.messages == 0 || state.secs_since_message > options_.stale_after_secs;
    if (!link.refusal.empty() && silent) {
      state.state = LinkState::kRefused;
    } else if (link.version_error_since_message && silent) {
      state.state = LinkState::kProtocolMismatch;
    } else if (link.messages == 0) {
      state.state = LinkState::kConnecting;
    } else if (silent) {
      state.state = LinkState::kStale;
    } else {
      state.state = LinkState::kLive;
    }
    states.push_back(std::move(state));
  }
  return states;
}

}  // namespace keel::app
