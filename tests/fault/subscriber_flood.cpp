#include "subscriber_flood.hpp"

#include <chrono>
#include <optional>
#include <random>
#include <vector>

#include <zmq.hpp>

#include "users_key_client.hpp"
#include "zmtp_subscriber.hpp"

namespace keel::fault {

struct SubscriberFlood::Sockets {
  zmq::context_t context{1};
  std::optional<zmq::socket_t> stalled;
};

SubscriberFlood::SubscriberFlood(std::string pub_endpoint, SubscriberFloodOptions options)
    : endpoint_(std::move(pub_endpoint)), options_(options), sockets_(std::make_unique<Sockets>()) {}

SubscriberFlood::~SubscriberFlood() { stop(); }

void SubscriberFlood::start() {
  if (options_.stalled) {
    sockets_->stalled.emplace(sockets_->context, zmq::socket_type::sub);
    zmq::socket_t& s = *sockets_->stalled;
    s.set(zmq::sockopt::linger, 0);
    s.set(zmq::sockopt::rcvbuf, options_.stalled_rcvbuf_bytes);
    s.set(zmq::sockopt::rcvhwm, 1);
    s.set(zmq::sockopt::subscribe, "");
    keel::test::present_users_key(s);
    s.connect(endpoint_);
    ++subscriptions_;
  }
  for (int i = 0; i < options_.huge_topic_subscribers; ++i) {
    hostile_.emplace_back([this] { subscribe_again_and_again({std::string(options_.huge_topic_bytes, 's')}); });
  }
  if (options_.random_subscriptions > 0) {
    std::vector<std::string> topics;
    std::mt19937 rng(13);
    std::uniform_int_distribution<int> length(1, 100), byte(0, 255);
    for (int i = 0; i < options_.random_subscriptions; ++i) {
      std::string topic(static_cast<size_t>(length(rng)), '\0');
      for (char& c : topic) c = static_cast<char>(byte(rng));
      topics.push_back(std::move(topic));
    }
    hostile_.emplace_back([this, topics = std::move(topics)] { subscribe_again_and_again(topics); });
  }
  if (options_.churn) thread_ = std::thread([this] { churn(); });
}

void SubscriberFlood::stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  for (auto& t : hostile_) t.join();
  hostile_.clear();
  sockets_->stalled.reset();
}

void SubscriberFlood::subscribe_again_and_again(const std::vector<std::string>& topics) {
  // As a libzmq SUB would: whenever the probe closes the connection, connect again after the
  // default reconnect interval and send every subscription again.
  ZmtpSubscriber client;
  while (!stop_.load()) {
    if (client.connect(endpoint_) && client.subscribe(topics)) subscriptions_ += topics.size();
    while (!stop_.load() && client.open(50)) {}
    client.close();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

void SubscriberFlood::churn() {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> linger_ms(0, 30);
  zmq::message_t message;
  while (!stop_.load()) {
    zmq::socket_t s(sockets_->context, zmq::socket_type::sub);
    s.set(zmq::sockopt::linger, 0);
    s.set(zmq::sockopt::subscribe, "");
    keel::test::present_users_key(s);
    s.connect(endpoint_);
    ++subscriptions_;
    // Some leave at once, some read a little first (the run description, a step or two).
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(linger_ms(rng));
    while (std::chrono::steady_clock::now() < until) {
      zmq::pollitem_t item{static_cast<void*>(s), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, std::chrono::milliseconds(5));
      while (s.recv(message, zmq::recv_flags::dontwait)) {}
    }
  }
}

}  // namespace keel::fault
