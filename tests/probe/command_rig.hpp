// Test rig for the probe's command socket: a probe on a wildcard port over the two-layer net,
// a plain DEALER client as keel-cli would use, and a per-step record of what each step did.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "keel/probe/probe.hpp"
#include "keel/wire/codec.hpp"
#include "two_layer_net.hpp"
#include "users_key_client.hpp"

namespace keel::test {

using keel::wire::Ack;
using keel::wire::Command;

// A wildcard port: parallel test runs never collide, and it exercises the command socket's
// own wildcard port.
inline keel::probe::ProbeOptions listening() {
  keel::probe::ProbeOptions o;
  o.endpoint = "tcp://127.0.0.1:*";
  o.describe_interval_secs = 60;   // only subscriptions and describe commands send one
  o.dump_on_nonfinite = false;      // dump_test.cpp turns it on, with a directory of its own
  o.record_dir = "";                // recording_probe_test.cpp records, in a directory of its own
  return o;
}

inline void forward_backward(TwoLayer& net, torch::optim::Optimizer& opt, int64_t seed) {
  torch::manual_seed(seed);
  opt.zero_grad();
  net->forward(torch::randn({4, 5})).pow(2).mean().backward();
}

class Client {
 public:
  // `present_users_key`: as keel-cli does by default; false: no keys at all.
  explicit Client(const std::string& endpoint, bool present_users_key = true) {
    socket_.set(zmq::sockopt::linger, 0);
    if (present_users_key) keel::test::present_users_key(socket_);
    socket_.connect(endpoint);
  }
  void send_frames(const std::vector<std::string>& frames) {
    for (size_t i = 0; i < frames.size(); ++i) {
      socket_.send(zmq::buffer(frames[i]), i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    }
  }
  void send(const Command& command) {
    const auto payload = keel::wire::encode(command);
    send_frames({"cmd", std::string(payload.begin(), payload.end())});
  }
  std::optional<Ack> receive(int timeout_ms) {
    zmq::pollitem_t item{static_cast<void*>(socket_), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, std::chrono::milliseconds(timeout_ms)) == 0) return std::nullopt;
    std::vector<zmq::message_t> frames;
    zmq::message_t frame;
    while (socket_.recv(frame, zmq::recv_flags::dontwait)) {
      const bool more = frame.more();
      frames.push_back(std::move(frame));
      if (!more) break;
    }
    EXPECT_EQ(frames.size(), 2u);
    last_topic_ = frames.empty() ? std::string() : frames[0].to_string();
    if (last_topic_ != "ack") {
      // A step record of a history reply: kept for the caller, not an ack.
      if (last_topic_ == "step") steps_.emplace_back(frames.back().data<char>(), frames.back().size());
      if (last_topic_ == "event") events_.emplace_back(frames.back().data<char>(), frames.back().size());
      return receive(timeout_ms);
    }
    auto decoded = keel::wire::decode(frames.back().data(), frames.back().size());
    EXPECT_TRUE(decoded.ok) << decoded.error;
    const auto* ack = std::get_if<Ack>(&decoded.message);
    if (ack == nullptr) return std::nullopt;
    return *ack;
  }

  // Payloads of "step" messages received so far (history replies), oldest first.
  const std::vector<std::string>& steps() const { return steps_; }
  // Payloads of "event" messages received so far (history replies), oldest first.
  const std::vector<std::string>& events() const { return events_; }

 private:
  std::string last_topic_;
  std::vector<std::string> steps_;
  std::vector<std::string> events_;
  zmq::context_t context_{1};
  zmq::socket_t socket_{context_, zmq::socket_type::dealer};
};

inline Command command(uint64_t id, const std::string& kind) {
  Command c;
  c.rank = -1;
  c.id = id;
  c.kind = kind;
  return c;
}

// What one step did, kept per step index.
struct Seen {
  keel::probe::StepOutcome outcome;
  keel::wire::StepRecord record;
  std::vector<keel::wire::Event> events;
  std::vector<torch::Tensor> state_before;
};

struct Rig {
  explicit Rig(keel::probe::ProbeOptions options = listening())
      : opt(net->parameters(), torch::optim::AdamWOptions(1e-2)), probe(*net, opt, options) {}
  // One training step; `nan` poisons a gradient first.
  void step(bool nan = false) {
    const int64_t s = static_cast<int64_t>(seen.size());
    forward_backward(net, opt, s);
    if (nan) poison(net->fc1->weight);
    Seen& out = seen[s];
    out.state_before = keel::test::params_and_adamw_state(*net, opt);
    out.outcome = probe.step(torch::tensor(1.0));
    out.record = probe.last_record();
    out.events = probe.last_events();
  }
  // Steps until the probe has answered, as a trainer would keep training meanwhile.
  Ack step_until_ack(Client& client) {
    for (int i = 0; i < 200; ++i) {
      step();
      if (auto ack = client.receive(20)) return *ack;
    }
    ADD_FAILURE() << "no ack after 200 steps";
    return Ack{};
  }
  static bool has_event(const Seen& s, const std::string& kind) {
    for (const auto& e : s.events) {
      if (e.kind == kind) return true;
    }
    return false;
  }

  TwoLayer net;
  torch::optim::AdamW opt;
  keel::probe::Probe probe;
  std::map<int64_t, Seen> seen;
};

}  // namespace keel::test
