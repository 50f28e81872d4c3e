// Command authentication: with CURVE on, a client whose key is on the allowed list is served;
// a stranger's key is refused at the handshake, nothing it sends is applied, and the refusal
// is an "auth_refused" event; unsafe or broken configurations are refused at attach.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

#include <zmq.hpp>

#include "command_rig.hpp"
#include "keel/wire/codec.hpp"
#include "keel/wire/curve_keys.hpp"
#include "temp_dir.hpp"
#include "two_layer_net.hpp"

namespace {

using keel::test::command;
using keel::test::Rig;
using keel::test::TempDir;
using keel::wire::CurveKeyPair;

// A DEALER that presents `client` to a server with public key `server_key`.
class CurveClient {
 public:
  CurveClient(const std::string& endpoint, const std::string& server_key, const CurveKeyPair& client) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.set(zmq::sockopt::curve_serverkey, server_key);
    socket_.set(zmq::sockopt::curve_publickey, client.public_key);
    socket_.set(zmq::sockopt::curve_secretkey, client.secret_key);
    socket_.connect(endpoint);
  }
  void send(const keel::wire::Command& c) {
    const auto payload = keel::wire::encode(c);
    socket_.send(zmq::buffer(std::string("cmd")), zmq::send_flags::sndmore);
    socket_.send(zmq::buffer(payload), zmq::send_flags::none);
  }
  // The ack, if one arrives within timeout_ms.
  std::optional<keel::wire::Ack> receive(int timeout_ms) {
    zmq::pollitem_t item{static_cast<void*>(socket_), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, std::chrono::milliseconds(timeout_ms)) == 0) return std::nullopt;
    zmq::message_t topic, payload;
    if (!socket_.recv(topic) || !topic.more() || !socket_.recv(payload)) return std::nullopt;
    const auto decoded = keel::wire::decode(payload.data(), payload.size());
    if (!decoded.ok) return std::nullopt;
    return std::get<keel::wire::Ack>(decoded.message);
  }

 private:
  zmq::context_t context_{1};
  zmq::socket_t socket_{context_, zmq::socket_type::dealer};
};

struct Keys {
  CurveKeyPair server = keel::wire::generate_curve_key_pair();
  CurveKeyPair allowed = keel::wire::generate_curve_key_pair();
  CurveKeyPair stranger = keel::wire::generate_curve_key_pair();
};

keel::probe::ProbeOptions authenticated(const Keys& keys) {
  keel::probe::ProbeOptions options = keel::test::listening();
  options.command_secret_key = keys.server.secret_key;
  options.allowed_client_keys = {keys.allowed.public_key};
  return options;
}

TEST(CommandAuth, AnAllowedKeyIsServedAndAStrangersIsRefusedAndReported) {
  ASSERT_TRUE(keel::wire::curve_available());
  const Keys keys;
  Rig rig(authenticated(keys));
  rig.step();

  CurveClient stranger(rig.probe.bound_command_endpoint(), keys.server.public_key, keys.stranger);
  keel::wire::Command skip = command(66, "skip");
  skip.count = 5;
  stranger.send(skip);
  bool reported = false;
  for (int i = 0; i < 40 && !reported; ++i) {
    rig.step();
    for (const auto& e : rig.seen.rbegin()->second.events) {
      if (e.kind != "auth_refused") continue;
      reported = true;
      EXPECT_NE(e.detail.find(keys.stranger.public_key), std::string::npos) << e.detail;
      EXPECT_NE(e.detail.find("127.0.0.1"), std::string::npos) << e.detail;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(reported) << "no auth_refused event";
  EXPECT_FALSE(stranger.receive(200)) << "a refused client got an answer";
  for (const auto& [step, seen] : rig.seen) EXPECT_TRUE(seen.outcome.applied) << "step " << step << " skipped";

  CurveClient friendly(rig.probe.bound_command_endpoint(), keys.server.public_key, keys.allowed);
  friendly.send(command(67, "describe"));
  std::optional<keel::wire::Ack> ack;
  for (int i = 0; i < 100 && !ack; ++i) {
    rig.step();
    ack = friendly.receive(20);
  }
  ASSERT_TRUE(ack) << "the allowed client got no ack";
  EXPECT_TRUE(ack->ok) << ack->error;
  EXPECT_EQ(ack->id, 67u);
}

TEST(CommandAuth, AClientWithoutKeysGetsNothingThroughAndIsReported) {
  const Keys keys;
  Rig rig(authenticated(keys));
  keel::test::Client plain(rig.probe.bound_command_endpoint(), /*present_users_key=*/false);
  keel::wire::Command skip = command(1, "skip");
  plain.send(skip);
  bool reported = false;
  for (int i = 0; i < 40 && !reported; ++i) {
    rig.step();
    for (const auto& e : rig.seen.rbegin()->second.events) reported = reported || e.kind == "auth_refused";
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(reported) << "a client without keys was not reported";
  EXPECT_FALSE(plain.receive(200));
  for (const auto& [step, seen] : rig.seen) EXPECT_TRUE(seen.outcome.applied) << "step " << step;
}

TEST(CommandAuth, UnsafeOrBrokenSetupsAreRefusedAtAttach) {
  keel::test::TwoLayer net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1));
  auto attach_error = [&](const keel::probe::ProbeOptions& options) -> std::string {
    try {
      keel::probe::Probe probe(*net, opt, options);
    } catch (const keel::probe::AttachError& e) {
      return e.what();
    }
    return "";
  };
  // Given no keys, a probe on the network takes commands with its user's own key only.
  keel::probe::ProbeOptions remote;
  remote.endpoint = "tcp://0.0.0.0:*";
  EXPECT_EQ(attach_error(remote), "");

  const Keys keys;
  keel::probe::ProbeOptions no_clients = authenticated(keys);
  no_clients.allowed_client_keys.clear();
  EXPECT_NE(attach_error(no_clients).find("no client key is allowed"), std::string::npos);
  keel::probe::ProbeOptions bad_secret = authenticated(keys);
  bad_secret.command_secret_key = "not a key";
  EXPECT_NE(attach_error(bad_secret).find("not a 40-character Z85 key"), std::string::npos);
  keel::probe::ProbeOptions bad_client = authenticated(keys);
  bad_client.allowed_client_keys.push_back("short");
  EXPECT_NE(attach_error(bad_client).find("allowed client key \"short\""), std::string::npos);
}

// The user's key is the default; where it cannot be used safely the trainer is told why and
// what to do, and the explicit opt-out still works.
TEST(CommandAuth, AnUnsafeKeyDirectoryIsRefusedAtAttachWithTheWayOut) {
  keel::test::TwoLayer net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1));
  TempDir tmp("loose-key-dir");
  const std::filesystem::path loose = tmp.path() / "keys";
  std::filesystem::create_directories(loose);
  ::chmod(loose.c_str(), 0755);
  const char* saved = std::getenv("KEEL_KEY_DIR");
  const std::string restore = saved ? saved : "";
  ::setenv("KEEL_KEY_DIR", loose.c_str(), 1);
  keel::probe::ProbeOptions options;
  options.endpoint = "tcp://127.0.0.1:*";
  std::string error;
  try {
    keel::probe::Probe probe(*net, opt, options);
  } catch (const keel::probe::AttachError& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("is open to other users (mode 755): run chmod 700"), std::string::npos) << error;
  EXPECT_NE(error.find("allow_unauthenticated_local"), std::string::npos) << error;
  options.allow_unauthenticated_local = true;
  EXPECT_NO_THROW(keel::probe::Probe(*net, opt, options));
  if (restore.empty()) {
    ::unsetenv("KEEL_KEY_DIR");
  } else {
    ::setenv("KEEL_KEY_DIR", restore.c_str(), 1);
  }
}

// Without the opt-out, a client that presents no keys is refused, and one with the user's own
// key (keel-cli's default) gets through: the command tests all go that way.
TEST(CommandAuth, TheDefaultTakesTheUsersOwnKeyOnly) {
  Rig rig;
  keel::test::Client plain(rig.probe.bound_command_endpoint(), /*present_users_key=*/false);
  plain.send(command(1, "describe"));
  keel::test::Client own(rig.probe.bound_command_endpoint());
  own.send(command(2, "describe"));
  std::optional<keel::wire::Ack> ack;
  bool refused = false;
  for (int i = 0; i < 100 && !(ack && refused); ++i) {
    rig.step();
    for (const auto& e : rig.seen.rbegin()->second.events) refused = refused || e.kind == "auth_refused";
    if (!ack) ack = own.receive(20);
  }
  ASSERT_TRUE(ack.has_value()) << "the user's own key was not taken";
  EXPECT_EQ(ack->id, 2u);
  EXPECT_TRUE(refused) << "a client without keys was not reported";
  EXPECT_FALSE(plain.receive(100));
}

TEST(CurveKeys, KeyPairsFilesAndPublicKeysAgree) {
  const CurveKeyPair pair = keel::wire::generate_curve_key_pair();
  EXPECT_TRUE(keel::wire::is_curve_key(pair.public_key));
  EXPECT_TRUE(keel::wire::is_curve_key(pair.secret_key));
  EXPECT_EQ(keel::wire::curve_public_key_of(pair.secret_key), pair.public_key);
  EXPECT_EQ(keel::wire::curve_public_key_of("short"), "");
  EXPECT_EQ(keel::wire::read_curve_key(pair.public_key), pair.public_key);
  EXPECT_THROW(keel::wire::read_curve_key("/nonexistent/keel.key"), std::runtime_error);
}

}  // namespace
