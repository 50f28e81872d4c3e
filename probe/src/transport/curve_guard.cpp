#include "curve_guard.hpp"

#include <algorithm>
#include <cstdint>

namespace keel::probe {

CurveGuard::CurveGuard(zmq::context_t& context, std::string secret_key, const std::vector<std::string>& allowed_keys,
                       std::chrono::milliseconds report_interval)
    : context_(context), secret_key_(std::move(secret_key)), zap_(context, allowed_keys),
      report_interval_(report_interval) {}

void CurveGuard::guard(zmq::socket_t& socket) {
  socket.set(zmq::sockopt::curve_server, true);
  socket.set(zmq::sockopt::curve_secretkey, secret_key_);
  socket.set(zmq::sockopt::zap_domain, "keel");
  const std::string monitor_at = "inproc://keel-guard-" + std::to_string(reinterpret_cast<uintptr_t>(this)) + "-" +
                                 std::to_string(monitors_made_++);
  if (zmq_socket_monitor(static_cast<void*>(socket), monitor_at.c_str(),
                         ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL) == 0) {
    monitor_ = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::pair);
    monitor_->set(zmq::sockopt::linger, 0);
    monitor_->connect(monitor_at);
  }
}

void CurveGuard::unguard(zmq::socket_t& socket) {
  if (!monitor_) return;
  zmq_socket_monitor(static_cast<void*>(socket), nullptr, 0);
  monitor_.reset();
}

size_t CurveGuard::poll_items(zmq::pollitem_t* items) {
  size_t count = 0;
  items[count++] = {static_cast<void*>(zap_.socket()), 0, ZMQ_POLLIN, 0};
  if (monitor_) items[count++] = {static_cast<void*>(*monitor_), 0, ZMQ_POLLIN, 0};
  return count;
}

void CurveGuard::service() {
  zap_.handle_requests();
  if (monitor_) {
    // Each event is two frames: event id + value, then the endpoint.
    zmq::message_t frame;
    while (monitor_->recv(frame, zmq::recv_flags::dontwait)) {
      if (frame.more()) zap_.note_failed_handshake();
      while (frame.more() && monitor_->recv(frame, zmq::recv_flags::dontwait)) {
      }
    }
  }
  std::vector<AuthRefusal> fresh;
  zap_.take_refusals(fresh);
  if (fresh.empty()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  for (AuthRefusal& r : fresh) {
    const auto same = std::find_if(refusals_.begin(), refusals_.end(), [&](const AuthRefusal& known) {
      return known.client_key == r.client_key && known.address == r.address;
    });
    if (same != refusals_.end()) {
      same->attempts += r.attempts;
    } else if (refusals_.size() < ZapAuthenticator::kMaxRefusalKinds) {
      refusals_.push_back(std::move(r));
    }
  }
  has_refusals_.store(true, std::memory_order_release);
}

bool CurveGuard::take_refusals(std::vector<AuthRefusal>& out) {
  out.clear();
  if (!has_refusals_.load(std::memory_order_acquire)) return false;
  const auto now = std::chrono::steady_clock::now();
  if (last_report_ && now - *last_report_ < report_interval_) return false;
  last_report_ = now;
  std::lock_guard<std::mutex> lock(mutex_);
  out.swap(refusals_);
  has_refusals_.store(false, std::memory_order_release);
  return !out.empty();
}

}  // namespace keel::probe
