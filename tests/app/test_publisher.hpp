// TestPublisher: a PUB socket on an ephemeral loopback port, standing in for a probe.
//
// What it is for: app tests that need real ZeroMQ traffic without a trainer. It binds
// tcp://127.0.0.1:* and reports the port ZeroMQ chose, so tests never collide on a port. With
// ServerAuth::kUsersOwnKey it takes keys as a probe given none does.
// Threads: owned by one thread (a test, or a publishing thread it starts).
#pragma once

#include <string>
#include <vector>

#include <zmq.hpp>

#include "keel/wire/codec.hpp"
#include "keel/wire/messages.hpp"
#include "server_auth.hpp"

namespace keel::app::test_support {

class TestPublisher {
 public:
  explicit TestPublisher(ServerAuth auth = ServerAuth::kNone) : socket_(context_, zmq::socket_type::pub) {
    socket_.set(zmq::sockopt::linger, 0);
    serve_with(socket_, auth);
    socket_.bind("tcp://127.0.0.1:*");
    endpoint_ = socket_.get(zmq::sockopt::last_endpoint);
  }

  const std::string& endpoint() const { return endpoint_; }

  // Sends exactly the frames given, so tests can send what a correct probe never would.
  void send_frames(const std::vector<std::string>& frames) {
    for (size_t i = 0; i < frames.size(); ++i) {
      const zmq::send_flags flags =
          i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none;
      (void)socket_.send(zmq::buffer(frames[i]), flags);
    }
  }

  void send(const keel::wire::Message& message) {
    const std::vector<char> payload = keel::wire::encode(message);
    send_frames({keel::wire::topic_of(message), std::string(payload.begin(), payload.end())});
  }

 private:
  zmq::context_t context_{1};
  zmq::socket_t socket_;
  std::string endpoint_;
};

// The TCP port of a "tcp://host:port" endpoint.
inline int port_of(const std::string& endpoint) { return std::stoi(endpoint.substr(endpoint.rfind(':') + 1)); }

// An endpoint on which nothing listens: a port the kernel just handed out and took back.
inline std::string unused_endpoint() {
  zmq::context_t context{1};
  zmq::socket_t socket{context, zmq::socket_type::pub};
  socket.set(zmq::sockopt::linger, 0);
  socket.bind("tcp://127.0.0.1:*");
  return socket.get(zmq::sockopt::last_endpoint);
}

// Messages with recognisable content, shared by the socket and CLI tests.
inline keel::wire::RunDescription sample_run(int32_t rank = 0) {
  keel::wire::RunDescription run;
  run.rank = rank;
  run.seq = 1;
  run.run_id = "demo-run";
  run.world_size = 2;
  run.layers = {{"fc1.weight", {16, 8}, 128, "float32"}, {"fc1.bias", {16}, 16, "float32"}};
  run.watches = {"logits"};
  run.keel_version = "0.1.0";
  run.torch_version = "1.13.1";
  run.device = "cpu";
  run.start_unix_ms = 1700000000000;
  return run;
}

inline keel::wire::StepRecord sample_step(int64_t step_index, int32_t rank = 0) {
  keel::wire::StepRecord step;
  step.rank = rank;
  step.seq = static_cast<uint64_t>(step_index) + 2;
  step.step = step_index;
  step.loss = 2.5;
  step.lr = 1e-3;
  step.grad_norm = 1.25;
  step.step_time_us = 78000;
  step.probe_us = 420;
  step.stamp_unix_ns = 1700000000000000000;
  step.layer_count = 2;
  // Metric-major: grad_norm, grad_absmax, grad_nonfinite, grad_zero_frac, param_norm,
  // update_ratio; two layers each.
  step.layer_values = {1.0f, 0.75f, 0.5f, 0.25f, 0, 0, 0, 0.125f, 3.0f, 2.0f, 1e-3f, 2e-3f};
  return step;
}

}  // namespace keel::app::test_support
