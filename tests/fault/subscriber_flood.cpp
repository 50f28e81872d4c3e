#include "subscriber_flood.hpp"

#include <chrono>
#include <optional>
#include <random>

#include <zmq.hpp>

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
    s.connect(endpoint_);
    ++subscriptions_;
  }
  if (options_.churn) thread_ = std::thread([this] { churn(); });
}

void SubscriberFlood::stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  sockets_->stalled.reset();
}

void SubscriberFlood::churn() {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> linger_ms(0, 30);
  zmq::message_t message;
  while (!stop_.load()) {
    zmq::socket_t s(sockets_->context, zmq::socket_type::sub);
    s.set(zmq::sockopt::linger, 0);
    s.set(zmq::sockopt::subscribe, "");
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
