#include "net/subscriber.hpp"

#include <stdexcept>

#include "keel/wire/codec.hpp"

namespace keel::app {

Subscriber::Subscriber(const std::vector<std::string>& endpoints, const ClientAuth& auth,
                       const std::string& history_token)
    : context_(1), socket_(context_, zmq::socket_type::sub), watch_(context_, present_keys(socket_, auth), auth) {
  socket_.set(zmq::sockopt::linger, 0);
  socket_.set(zmq::sockopt::reconnect_ivl, kReconnectMs);
  socket_.set(zmq::sockopt::subscribe, "");
  // Matches no topic: it only tells the probe that a history request will follow.
  if (!history_token.empty()) {
    socket_.set(zmq::sockopt::subscribe, std::string(keel::wire::kHistoryIntentPrefix) + history_token);
  }
  for (const std::string& endpoint : endpoints) connect(endpoint);
}

void Subscriber::connect(const std::string& endpoint) {
  try {
    socket_.connect(endpoint);
  } catch (const zmq::error_t& error) {
    throw std::invalid_argument("cannot connect to '" + endpoint + "': " + error.what());
  }
  endpoints_.push_back(endpoint);
}

ReceiveResult Subscriber::receive(int timeout_ms) {
  watch_.update();
  ReceiveResult result = read_message(socket_, timeout_ms);
  if (result.status == ReceiveStatus::kDecodeError) ++decode_errors_;
  if (result.status == ReceiveStatus::kMessage) ++messages_received_;
  return result;
}

}  // namespace keel::app
