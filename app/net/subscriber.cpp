#include "net/subscriber.hpp"

#include <stdexcept>

namespace keel::app {

Subscriber::Subscriber(const std::vector<std::string>& endpoints)
    : context_(1), socket_(context_, zmq::socket_type::sub) {
  socket_.set(zmq::sockopt::linger, 0);
  socket_.set(zmq::sockopt::subscribe, "");
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
  ReceiveResult result = read_message(socket_, timeout_ms);
  if (result.status == ReceiveStatus::kDecodeError) ++decode_errors_;
  if (result.status == ReceiveStatus::kMessage) ++messages_received_;
  return result;
}

}  // namespace keel::app
