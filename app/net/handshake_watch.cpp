#include "net/handshake_watch.hpp"

#include <cstdio>
#include <cstring>

namespace keel::app {
namespace {

bool is_mechanism_mismatch(uint16_t event, uint32_t value) {
  return event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL && value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH;
}

constexpr int kHandshakeEvents = ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                                 ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH;
// A check that has no verdict by then (the probe went away) is dropped; the next failure
// starts another.
constexpr std::chrono::seconds kKeyCheckTimeout{5};

// One monitor event: its id, value and endpoint. False when none is waiting.
bool next_event(zmq::socket_t& monitor, uint16_t& event, uint32_t& value, std::string& endpoint) {
  zmq::message_t head, address;
  // Each event is two frames: event id (2 bytes) and value (4 bytes), then the endpoint.
  while (monitor.recv(head, zmq::recv_flags::dontwait)) {
    if (!head.more() || !monitor.recv(address, zmq::recv_flags::dontwait)) continue;
    if (head.size() < 6) continue;
    std::memcpy(&event, head.data(), sizeof event);
    std::memcpy(&value, static_cast<const char*>(head.data()) + sizeof event, sizeof value);
    endpoint = address.to_string();
    return true;
  }
  return false;
}

// A monitor of `socket` at `address`, in `context`; null when one cannot be made.
std::unique_ptr<zmq::socket_t> monitor_of(zmq::context_t& context, zmq::socket_t& socket, const char* address) {
  if (zmq_socket_monitor(static_cast<void*>(socket), address, kHandshakeEvents) != 0) return nullptr;
  auto monitor = std::make_unique<zmq::socket_t>(context, zmq::socket_type::pair);
  monitor->set(zmq::sockopt::linger, 0);
  monitor->connect(address);
  return monitor;
}

}  // namespace

std::string describe_handshake_failure(uint16_t event, uint32_t value, const std::string& endpoint,
                                       const ClientAuth& auth, KeyCause cause) {
  const std::string other_keys = " (--server-key and --key)";
  const std::string takes_no_keys =
      endpoint + " takes no keys (its probe allows unauthenticated clients, allow_unauthenticated_local): "
                 "connect with --no-auth";
  if (!auth.enabled()) {
    // Without keys, a keel probe fails the handshake only when it requires them.
    return endpoint + " requires keys: leave out --no-auth to present your own key (~/.keel/user.key), or give "
                      "the keys its probe was given" + other_keys;
  }
  if (is_mechanism_mismatch(event, value)) return takes_no_keys;
  if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
    return endpoint + " refused this client's key" +
           (auth.users_own ? ": the run is not yours (its probe takes only its owner's key), or its probe was given "
                             "keys of its own" + other_keys
                           : ": it is not on the probe's allowed list");
  }
  if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL) {
    char code[16];
    std::snprintf(code, sizeof code, "0x%08x", value);
    return endpoint + ": the handshake failed (ZMTP protocol error " + code + "): it may not be a keel probe";
  }
  if (cause == KeyCause::kTakesNoKeys) return takes_no_keys;
  // The probe could not open this client's greeting: it was sealed for another key.
  std::string sentence = endpoint + " did not accept the handshake: its key is not the one this client expects" +
                         (auth.users_own ? " (the run is probably another user's, or its probe was given keys of "
                                           "its own" + other_keys + ")"
                                         : " (check --server-key)");
  if (cause == KeyCause::kUnknown) sentence += ", or it takes no keys (connect with --no-auth)";
  return sentence;
}

struct HandshakeWatch::KeyCheck {
  // Of the watched socket's type, which the probe's socket accepts (a SUB for telemetry, a
  // DEALER for commands): a mismatched type would fail the handshake for that reason alone.
  explicit KeyCheck(int type) : socket(context, type) {}
  // A context of its own: the watched socket's may be moved with its owner, this is not.
  zmq::context_t context{1};
  zmq::socket_t socket;
  std::unique_ptr<zmq::socket_t> monitor;
  std::string endpoint;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  ~KeyCheck() {
    if (monitor) zmq_socket_monitor(static_cast<void*>(socket), nullptr, 0);
  }
};

HandshakeWatch::HandshakeWatch(zmq::context_t& context, zmq::socket_t& socket, ClientAuth auth)
    : auth_(std::move(auth)) {
  try {
    socket_type_ = socket.get(zmq::sockopt::type);
    // One watched socket per context, so the address need not be unique beyond it.
    monitor_ = monitor_of(context, socket, "inproc://keel-handshake-watch");
  } catch (const zmq::error_t&) {
    monitor_.reset();
  }
}

HandshakeWatch::HandshakeWatch(HandshakeWatch&&) noexcept = default;
HandshakeWatch::~HandshakeWatch() = default;

void HandshakeWatch::start_key_check(const std::string& endpoint) {
  if (check_) return;
  try {
    auto check = std::make_unique<KeyCheck>(socket_type_);
    check->socket.set(zmq::sockopt::linger, 0);
    check->monitor = monitor_of(check->context, check->socket, "inproc://keel-key-check");
    if (!check->monitor) return;
    check->endpoint = endpoint;
    // It sends and subscribes to nothing: it only shakes hands.
    check->socket.connect(endpoint);
    check_ = std::move(check);
  } catch (const zmq::error_t&) {
  }
}

std::string HandshakeWatch::take_key_check() {
  if (!check_) return {};
  uint16_t event = 0;
  uint32_t value = 0;
  std::string endpoint;
  while (next_event(*check_->monitor, event, value, endpoint)) {
    const KeyCause cause = event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED ? KeyCause::kTakesNoKeys : KeyCause::kWrongKey;
    std::string checked = std::move(check_->endpoint);
    causes_[checked] = cause;
    check_.reset();
    return checked;
  }
  if (std::chrono::steady_clock::now() - check_->started > kKeyCheckTimeout) check_.reset();
  return {};
}

bool HandshakeWatch::set_refusal(std::string sentence) {
  if (sentence == refusal_) return false;
  refusal_ = std::move(sentence);
  return true;
}

bool HandshakeWatch::update() {
  if (!monitor_) return false;
  bool changed = false;
  try {
    const std::string checked = take_key_check();
    if (!checked.empty() && checked == refused_endpoint_) {
      // The closed handshake that started the check is told again with its cause.
      changed = set_refusal(
          describe_handshake_failure(ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL, 0, checked, auth_, causes_[checked]));
    }
    uint16_t event = 0;
    uint32_t value = 0;
    std::string endpoint;
    while (next_event(*monitor_, event, value, endpoint)) {
      if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
        // The probe may come back otherwise set up: its next refusal is looked at afresh.
        causes_.erase(endpoint);
        refused_endpoint_.clear();
        changed = set_refusal("") || changed;
        continue;
      }
      if (is_mechanism_mismatch(event, value)) causes_[endpoint] = KeyCause::kTakesNoKeys;
      const auto known = causes_.find(endpoint);
      const KeyCause cause = known == causes_.end() ? KeyCause::kUnknown : known->second;
      if (event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL && auth_.enabled() && cause == KeyCause::kUnknown) {
        start_key_check(endpoint);
      }
      refused_endpoint_ = endpoint;
      changed = set_refusal(describe_handshake_failure(event, value, endpoint, auth_, cause)) || changed;
    }
  } catch (const zmq::error_t&) {
  }
  return changed;
}

}  // namespace keel::app
