#include "command_channel.hpp"

#include <chrono>

#include <zmq.hpp>

#include "keel/wire/codec.hpp"
#include "users_key_client.hpp"

namespace keel::fault {

struct CommandChannel::Socket {
  zmq::context_t context{1};
  zmq::socket_t socket{context, zmq::socket_type::dealer};
};

namespace {
using Clock = std::chrono::steady_clock;

// The refusal's first words name its kind ("busy: 64 commands ..." -> "busy:").
std::string reason_kind(const std::string& error) {
  const size_t cut = std::min(error.find_first_of("0123456789\""), size_t{32});
  return error.substr(0, std::min(cut, error.size()));
}
}  // namespace

CommandChannel::CommandChannel(const std::string& command_endpoint)
    : socket_(std::make_unique<Socket>()),
      // Ids unique across channels of one test, so an ack can never be claimed by the wrong one.
      next_id_(uint64_t(Clock::now().time_since_epoch().count()) & 0xffffffffffffull) {
  socket_->socket.set(zmq::sockopt::linger, 0);
  keel::test::present_users_key(socket_->socket);
  socket_->socket.connect(command_endpoint);
}

CommandChannel::~CommandChannel() = default;

bool CommandChannel::send_frames(const std::vector<std::string>& frames, int timeout_ms) {
  auto& s = socket_->socket;
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    zmq::pollitem_t item{static_cast<void*>(s), 0, ZMQ_POLLOUT | ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds(10));
    if (item.revents & ZMQ_POLLIN) collect_ready();
    if (item.revents & ZMQ_POLLOUT) break;
    if (Clock::now() >= deadline) return false;
  }
  for (size_t i = 0; i < frames.size(); ++i) {
    const auto more = i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none;
    s.send(zmq::buffer(frames[i]), more);
  }
  return true;
}

uint64_t CommandChannel::send(wire::Command command, int timeout_ms) {
  command.id = ++next_id_;
  command.rank = -1;
  const std::vector<char> payload = wire::encode(command);
  if (!send_frames({wire::kTopicCommand, std::string(payload.begin(), payload.end())}, timeout_ms)) return 0;
  sent_ids_[command.id] = 0;
  return command.id;
}

bool CommandChannel::send_garbage(std::mt19937& rng, int timeout_ms) {
  std::uniform_int_distribution<int> byte(0, 255);
  std::string noise(size_t(std::uniform_int_distribution<int>(0, 200)(rng)), '\0');
  for (char& c : noise) c = char(byte(rng));
  wire::Command valid;
  valid.kind = "describe";
  const std::vector<char> encoded = wire::encode(valid);
  const std::string payload(encoded.begin(), encoded.end());
  std::vector<std::string> frames;
  switch (std::uniform_int_distribution<int>(0, 5)(rng)) {
    case 0: frames = {wire::kTopicCommand, noise}; break;                          // random bytes
    case 1: frames = {"telemetry", payload}; break;                                 // wrong topic
    case 2: frames = {payload}; break;                                               // one frame
    case 3: frames = {wire::kTopicCommand, payload, noise, noise}; break;           // too many frames
    case 4: frames = {wire::kTopicCommand, payload.substr(0, payload.size() / 2)}; break;  // truncated
    default: frames = {wire::kTopicCommand, std::string(70 * 1024, 'x')}; break;    // over 64 KiB
  }
  if (!send_frames(frames, timeout_ms)) return false;
  ++sent_garbage_;
  return true;
}

void CommandChannel::take(const wire::Ack& ack) {
  ++tally_.acks;
  if (ack.ok) {
    ++tally_.ok;
  } else {
    ++tally_.refused;
    ++tally_.refusal_reasons[reason_kind(ack.error)];
  }
  const auto sent = sent_ids_.find(ack.id);
  if (sent == sent_ids_.end()) {
    ++tally_.unknown;
    return;
  }
  if (++sent->second > 1) ++tally_.duplicates;
  acks_[ack.id] = ack;
}

void CommandChannel::collect(int timeout_ms) {
  auto& s = socket_->socket;
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  zmq::message_t topic, payload;
  for (;;) {
    while (s.recv(topic, zmq::recv_flags::dontwait)) {
      if (!topic.more()) continue;
      if (!s.recv(payload, zmq::recv_flags::none)) break;
      while (payload.more() && s.recv(payload, zmq::recv_flags::none)) {}   // not a 2-frame ack: skip
      const wire::DecodeResult decoded = wire::decode(payload.data(), payload.size());
      if (const auto* ack = decoded.ok ? std::get_if<wire::Ack>(&decoded.message) : nullptr) take(*ack);
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0 || unanswered() == 0) return;
    zmq::pollitem_t item{static_cast<void*>(s), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::min(left, std::chrono::milliseconds(50)));
  }
}

uint64_t CommandChannel::unanswered() const {
  uint64_t count = 0;
  for (const auto& [id, acks] : sent_ids_) count += acks == 0;
  return count;
}

const wire::Ack* CommandChannel::ack_for(uint64_t id) const {
  const auto it = acks_.find(id);
  return it == acks_.end() ? nullptr : &it->second;
}

}  // namespace keel::fault
