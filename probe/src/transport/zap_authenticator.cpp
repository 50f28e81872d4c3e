#include "zap_authenticator.hpp"

#include <algorithm>

namespace keel::probe {
namespace {
constexpr const char* kZapEndpoint = "inproc://zeromq.zap.01";
constexpr size_t kCurveKeyBytes = 32;

std::string z85_of(const zmq::message_t& binary_key) {
  if (binary_key.size() != kCurveKeyBytes) return {};
  char text[41] = {};
  if (zmq_z85_encode(text, static_cast<const uint8_t*>(binary_key.data()), kCurveKeyBytes) == nullptr) return {};
  return text;
}
}  // namespace

ZapAuthenticator::ZapAuthenticator(zmq::context_t& context, const std::vector<std::string>& allowed_keys)
    : socket_(context, zmq::socket_type::rep), allowed_(allowed_keys.begin(), allowed_keys.end()) {
  socket_.set(zmq::sockopt::linger, 0);
  socket_.bind(kZapEndpoint);
}

void ZapAuthenticator::handle_requests() {
  zmq::message_t frame;
  while (socket_.recv(frame, zmq::recv_flags::dontwait)) {
    std::vector<zmq::message_t> request;
    request.push_back(std::move(frame));
    while (request.back().more() && request.size() < 16) {
      zmq::message_t next;
      if (!socket_.recv(next, zmq::recv_flags::none)) break;
      request.push_back(std::move(next));
    }
    answer(request);
  }
}

// Request frames: version, request id, domain, address, routing id, mechanism, credentials.
// Reply frames: version, request id, status code, status text, user id, metadata.
void ZapAuthenticator::answer(const std::vector<zmq::message_t>& request) {
  const std::string version = request.empty() ? std::string() : request[0].to_string();
  const std::string request_id = request.size() > 1 ? request[1].to_string() : std::string();
  std::string status = "400", text = "malformed ZAP request", user;
  if (request.size() >= 7 && version == "1.0") {
    const std::string address = request[3].to_string();
    const std::string mechanism = request[5].to_string();
    const std::string key = mechanism == "CURVE" ? z85_of(request[6]) : std::string();
    if (!key.empty() && allowed_.count(key) != 0) {
      status = "200";
      text = "OK";
      user = key;
    } else {
      text = key.empty() ? "CURVE authentication required" : "client key not allowed";
      remember_refusal(key, address);
    }
  }
  socket_.send(zmq::buffer(std::string("1.0")), zmq::send_flags::sndmore);
  socket_.send(zmq::buffer(request_id), zmq::send_flags::sndmore);
  socket_.send(zmq::buffer(status), zmq::send_flags::sndmore);
  socket_.send(zmq::buffer(text), zmq::send_flags::sndmore);
  socket_.send(zmq::buffer(user), zmq::send_flags::sndmore);
  socket_.send(zmq::buffer(std::string()), zmq::send_flags::none);
}

void ZapAuthenticator::remember_refusal(const std::string& key, const std::string& address) {
  const auto same = std::find_if(refusals_.begin(), refusals_.end(), [&](const AuthRefusal& r) {
    return r.client_key == key && r.address == address;
  });
  if (same != refusals_.end()) {
    ++same->attempts;
  } else if (refusals_.size() < kMaxRefusalKinds) {
    refusals_.push_back(AuthRefusal{key, address, 1});
  } else {
    ++refusals_dropped_;
  }
}

void ZapAuthenticator::take_refusals(std::vector<AuthRefusal>& out) {
  out = std::move(refusals_);
  refusals_.clear();
  if (refusals_dropped_ > 0) {
    out.push_back(AuthRefusal{"(other keys)", "(various)", refusals_dropped_});
    refusals_dropped_ = 0;
  }
}

}  // namespace keel::probe
