// Telemetry authentication: with the defaults, the probe's telemetry is read only with the key
// of the user running it, as keel-cli and the dashboard present it; another user's key and no
// key at all are refused at the handshake and reported as auth_refused events; with
// authenticate_telemetry off, anyone reads the run while commands stay authenticated.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <string>

#include <zmq.hpp>

#include "command_rig.hpp"
#include "keel/wire/curve_keys.hpp"
#include "users_key_client.hpp"

namespace {

using keel::test::command;
using keel::test::Rig;

enum class Keys { kUsersOwn, kAnotherUsersOwn, kNone };

// A SUB on `endpoint` with the given keys; "another user's own" takes that user's public key
// as the server's, as their keel-cli would by default.
class Reader {
 public:
  Reader(const std::string& endpoint, Keys keys) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.set(zmq::sockopt::subscribe, "");
    if (keys == Keys::kUsersOwn) keel::test::present_users_key(socket_);
    if (keys == Keys::kAnotherUsersOwn) {
      const keel::wire::CurveKeyPair other = keel::wire::generate_curve_key_pair();
      socket_.set(zmq::sockopt::curve_serverkey, other.public_key);
      socket_.set(zmq::sockopt::curve_publickey, other.public_key);
      socket_.set(zmq::sockopt::curve_secretkey, other.secret_key);
    }
    socket_.connect(endpoint);
  }
  // Whether a run description arrived within timeout_ms (the probe sends one to every new
  // subscriber).
  bool described(int timeout_ms) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    zmq::message_t frame;
    while (std::chrono::steady_clock::now() < until) {
      zmq::pollitem_t item{static_cast<void*>(socket_), 0, ZMQ_POLLIN, 0};
      if (zmq::poll(&item, 1, std::chrono::milliseconds(20)) == 0) continue;
      while (socket_.recv(frame, zmq::recv_flags::dontwait)) {
        if (frame.to_string() == keel::wire::kTopicRun) return true;
      }
    }
    return false;
  }

 private:
  zmq::context_t context_{1};
  zmq::socket_t socket_{context_, zmq::socket_type::sub};
};

// The auth_refused events of the steps taken so far whose detail names telemetry.
int telemetry_refusals(const Rig& rig) {
  int found = 0;
  for (const auto& [step, seen] : rig.seen) {
    for (const auto& e : seen.events) {
      if (e.kind == "auth_refused" && e.detail.find("telemetry connection") != std::string::npos) ++found;
    }
  }
  return found;
}

TEST(TelemetryAuth, OnlyTheUsersOwnKeyReadsTheRunAndTheOthersAreReported) {
  if (!keel::wire::curve_available()) GTEST_SKIP() << "this libzmq has no CURVE";
  Rig rig;
  Reader other(rig.probe.bound_endpoint(), Keys::kAnotherUsersOwn);
  Reader plain(rig.probe.bound_endpoint(), Keys::kNone);
  Reader own(rig.probe.bound_endpoint(), Keys::kUsersOwn);
  EXPECT_TRUE(own.described(5000)) << "the user's own key was not taken";
  for (int i = 0; i < 100 && telemetry_refusals(rig) == 0; ++i) {
    rig.step();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_GT(telemetry_refusals(rig), 0) << "the refused readers were not reported";
  EXPECT_FALSE(other.described(500)) << "another user's key read the run";
  EXPECT_FALSE(plain.described(500)) << "a reader without keys read the run";
}

TEST(TelemetryAuth, OffAnyoneReadsTheRunWhileCommandsStayAuthenticated) {
  keel::probe::ProbeOptions options = keel::test::listening();
  options.authenticate_telemetry = false;
  Rig rig(options);
  Reader plain(rig.probe.bound_endpoint(), Keys::kNone);
  EXPECT_TRUE(plain.described(5000)) << "telemetry without authentication refused a reader without keys";

  keel::test::Client unkeyed(rig.probe.bound_command_endpoint(), /*present_users_key=*/false);
  unkeyed.send(command(1, "describe"));
  keel::test::Client own(rig.probe.bound_command_endpoint());
  own.send(command(2, "describe"));
  std::optional<keel::wire::Ack> ack;
  for (int i = 0; i < 100 && !ack; ++i) {
    rig.step();
    ack = own.receive(20);
  }
  ASSERT_TRUE(ack.has_value()) << "the user's own key was not taken for commands";
  EXPECT_FALSE(unkeyed.receive(200)) << "a command without keys was answered";
}

}  // namespace
