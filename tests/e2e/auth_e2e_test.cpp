// Authenticated commands end to end: keys from `keel-cli keygen`, keel-demo taking commands
// only from the allowed client key, keel-cli sending with and without the right key.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "child_process.hpp"

namespace {

namespace fs = std::filesystem;
using keel::e2e::ChildProcess;

std::string first_line(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

TEST(AuthE2E, OnlyTheAllowedKeyControlsTheRunAndStrangersAreLogged) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("keel-e2e-auth-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* name : {"probe", "laptop", "stranger"}) {
    ChildProcess keygen({KEEL_CLI_PATH, "keygen", (dir / name).string()});
    ASSERT_NE(keygen.wait_for("wrote", 20), "") << keygen.output();
  }
  EXPECT_EQ(fs::status(dir / "probe.key").permissions() & fs::perms::others_read, fs::perms::none);
  ChildProcess again({KEEL_CLI_PATH, "keygen", (dir / "probe").string()});
  EXPECT_NE(again.wait_for("exists already", 20), "") << "keygen overwrote a key: " << again.output();

  const int port = keel::e2e::free_port_pair();
  ASSERT_GT(port, 0);
  const std::string endpoint = "tcp://127.0.0.1:" + std::to_string(port);
  ChildProcess demo({KEEL_DEMO_PATH, "--steps", "0", "--pace", "20", "--log-every", "0", "--endpoint", endpoint,
                     "--command-key", (dir / "probe.key").string(), "--allow-key", (dir / "laptop.pub").string()});
  ASSERT_NE(demo.wait_for("telemetry on", 60), "") << demo.output();

  // The stranger's key is refused at the handshake: no ack, exit 2, and an event in the run.
  ChildProcess stranger({KEEL_CLI_PATH, "send", "--endpoint", endpoint, "--timeout", "3", "--server-key",
                         (dir / "probe.pub").string(), "--key", (dir / "stranger.key").string(), "skip"});
  EXPECT_NE(stranger.wait_for("no acknowledgement", 20), "") << stranger.output();
  const std::string refused = demo.wait_for("event auth_refused", 20);
  EXPECT_NE(refused.find(first_line(dir / "stranger.pub")), std::string::npos) << demo.output();
  EXPECT_EQ(demo.output().find("event skip"), std::string::npos) << "a refused skip was applied";

  // No keys at all: nothing gets through either.
  ChildProcess plain({KEEL_CLI_PATH, "send", "--endpoint", endpoint, "--timeout", "3", "skip"});
  EXPECT_NE(plain.wait_for("no acknowledgement", 20), "") << plain.output();

  ChildProcess laptop({KEEL_CLI_PATH, "send", "--endpoint", endpoint, "--timeout", "20", "--server-key",
                       (dir / "probe.pub").string(), "--key", (dir / "laptop.key").string(), "skip"});
  const std::string ack_line = laptop.wait_for("\"type\":\"ack\"", 30);
  ASSERT_NE(ack_line, "") << laptop.output();
  const auto ack = nlohmann::json::parse(ack_line);
  EXPECT_TRUE(ack["ok"].get<bool>()) << ack_line;
  EXPECT_NE(demo.wait_for("event skip", 20), "") << demo.output();
  // Exactly one skip in the run: the two refused ones never reached the training loop.
  const std::string out = demo.output();
  EXPECT_EQ(out.find("event skip"), out.rfind("event skip")) << out;
  fs::remove_all(dir);
}

}  // namespace
