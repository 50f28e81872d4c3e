#include "net/command_socket.hpp"

#include <stdexcept>
#include <string_view>
#include <vector>

#include "keel/wire/codec.hpp"

namespace keel::app {

CommandSocket::CommandSocket(const std::string& command_endpoint, const ClientAuth& auth)
    : context_(1),
      socket_(context_, zmq::socket_type::dealer),
      watch_(context_, present_keys(socket_, auth), auth),
      endpoint_(command_endpoint) {
  socket_.set(zmq::sockopt::linger, 0);
  // A history answer is thousands of messages sent at once; the probe's ROUTER drops what
  // does not fit in our receive queue, so it must not be the one that limits.
  socket_.set(zmq::sockopt::rcvhwm, 0);
  try {
    socket_.connect(command_endpoint);
  } catch (const zmq::error_t& error) {
    throw std::invalid_argument("cannot connect to '" + command_endpoint + "': " + error.what());
  }
}

bool CommandSocket::send(const keel::wire::Command& command, std::string& error) {
  const std::vector<char> payload = keel::wire::encode(command);
  const std::string_view topic(keel::wire::kTopicCommand);
  try {
    if (!socket_.send(zmq::buffer(topic), zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
      error = "the command queue to " + endpoint_ + " is full";
      return false;
    }
    // The first frame went out, so ZeroMQ takes the rest of the message atomically.
    (void)socket_.send(zmq::buffer(payload), zmq::send_flags::none);
  } catch (const zmq::error_t& failure) {
    error = "cannot send to " + endpoint_ + ": " + failure.what();
    return false;
  }
  return true;
}

}  // namespace keel::app
