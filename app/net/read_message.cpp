#include "net/read_message.hpp"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <utility>

#include "keel/wire/codec.hpp"

namespace keel::app {
namespace {

// Frames come from the network: a topic may be any bytes. Errors quote it, so keep it short
// and printable for a terminal.
std::string printable_topic(const zmq::message_t& frame) {
  constexpr size_t kMaxShown = 32;
  const auto* bytes = static_cast<const unsigned char*>(frame.data());
  std::string out;
  for (size_t i = 0; i < frame.size() && i < kMaxShown; ++i) {
    const unsigned char c = bytes[i];
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      char escaped[5];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
      out += escaped;
    }
  }
  if (frame.size() > kMaxShown) out += "...";
  return out;
}

}  // namespace

ReceiveResult read_message(zmq::socket_t& socket, int timeout_ms) {
  ReceiveResult result;
  zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
  try {
    if (zmq::poll(&item, 1, std::chrono::milliseconds(timeout_ms < 0 ? 0 : timeout_ms)) == 0) {
      return result;
    }
  } catch (const zmq::error_t& error) {
    if (error.num() != EINTR) throw;
    result.status = ReceiveStatus::kInterrupted;
    return result;
  }

  // Read every frame of the message so the next receive starts on a message boundary, but keep
  // only the two we understand: a peer sending thousands of frames cannot make us hold them.
  zmq::message_t kept[2];
  size_t frame_count = 0;
  zmq::message_t frame;
  while (true) {
    // Polled readable and ZeroMQ delivers messages atomically, so dontwait never truncates.
    if (!socket.recv(frame, zmq::recv_flags::dontwait)) break;
    const bool more = frame.more();
    if (frame_count < 2) kept[frame_count] = std::move(frame);
    ++frame_count;
    if (!more) break;
  }
  if (frame_count == 0) return result;

  result.topic = printable_topic(kept[0]);
  result.status = ReceiveStatus::kDecodeError;
  if (frame_count != 2) {
    result.error = "expected 2 frames (topic, payload), got " + std::to_string(frame_count);
    return result;
  }
  keel::wire::DecodeResult decoded = keel::wire::decode(kept[1].data(), kept[1].size());
  if (!decoded.ok) {
    result.error = "topic '" + result.topic + "': " + decoded.error;
    return result;
  }
  const char* expected_topic = keel::wire::topic_of(decoded.message);
  if (kept[0].to_string_view() != expected_topic) {
    result.error = "payload is a '" + std::string(expected_topic) +
                   "' message but arrived on topic '" + result.topic + "'";
    return result;
  }
  result.status = ReceiveStatus::kMessage;
  result.message = std::move(decoded.message);
  return result;
}

}  // namespace keel::app
