// Authenticated commands end to end: keys from `keel-cli keygen`, keel-demo taking commands
// only from the allowed client key, keel-cli sending with and without the right key; and the
// defaults: keel-demo given no keys takes commands and telemetry subscribers from its own user
// only, whose keel-cli needs no flag, while another Unix user on the same machine is refused
// (steering and reading) and reported.
#include <gtest/gtest.h>
#include <unistd.h>

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
  EXPECT_NE(stranger.wait_for("no acknowledgement", 20).find("refused this client's key: it is not on the probe's allowed list"),
            std::string::npos)
      << stranger.output();
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

// A second Unix user on the machine (created once, kept): commands as them go through
// runuser, with a home of their own and a copy of keel-cli they may run.
struct OtherUser {
  static constexpr const char* kName = "keel-intruder";
  fs::path home, cli;
  std::string runuser, env;   // the tools' paths (a child is started without a PATH search)
  std::string skip_reason;    // why the test cannot run here; "" when it can

  OtherUser() {
    if (::geteuid() != 0) {
      skip_reason = "needs root to create and become a second user (CI runs as root)";
      return;
    }
    runuser = keel::e2e::run_command("command -v runuser");
    env = keel::e2e::run_command("command -v env");
    if (runuser.empty() || env.empty()) {
      skip_reason = "runuser (util-linux) is not installed";
      return;
    }
    if (keel::e2e::run_command(std::string("id -u ") + kName + " 2>/dev/null").empty()) {
      keel::e2e::run_command(std::string("useradd --system --no-create-home --shell /usr/sbin/nologin ") + kName + " 2>&1");
    }
    if (keel::e2e::run_command(std::string("id -u ") + kName + " 2>/dev/null").empty()) {
      skip_reason = "useradd could not create the user";
      return;
    }
    const fs::path base = fs::path("/tmp") / ("keel-e2e-other-user-" + std::to_string(::getpid()));
    fs::remove_all(base);
    home = base / "home";
    fs::create_directories(home);
    cli = base / "keel-cli";
    fs::copy_file(KEEL_CLI_PATH, cli);
    fs::permissions(base, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
    fs::permissions(cli, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
    keel::e2e::run_command("chown " + std::string(kName) + " " + home.string());
  }
  ~OtherUser() {
    if (!home.empty()) fs::remove_all(home.parent_path());
  }
  // The command line that runs keel-cli `args` as this user.
  std::vector<std::string> keel_cli(const std::vector<std::string>& args) const {
    std::vector<std::string> argv = {runuser, "-u", kName, "--", env, "HOME=" + home.string(), cli.string()};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }
};

TEST(AuthE2E, WithTheDefaultsAnotherUserIsRefusedAndTheOwnerNeedsNoFlag) {
  const OtherUser other;
  if (!other.skip_reason.empty()) GTEST_SKIP() << other.skip_reason;
  const int port = keel::e2e::free_port_pair();
  ASSERT_GT(port, 0);
  const std::string endpoint = "tcp://127.0.0.1:" + std::to_string(port);
  ChildProcess demo({KEEL_DEMO_PATH, "--steps", "0", "--pace", "20", "--log-every", "0", "--endpoint", endpoint});
  ASSERT_NE(demo.wait_for("telemetry on", 60), "") << demo.output();

  // The other user's keel-cli presents their own key: refused at the handshake, told why, and
  // the run reports it.
  ChildProcess intruder(other.keel_cli({"send", "--endpoint", endpoint, "--timeout", "3", "skip", "--count", "5"}));
  const std::string refusal = intruder.wait_for("no acknowledgement", 20);
  EXPECT_NE(refusal.find("refused: "), std::string::npos) << intruder.output();
  EXPECT_NE(refusal.find("the run is probably another user's"), std::string::npos) << intruder.output();
  EXPECT_NE(refusal.find("was not delivered"), std::string::npos) << intruder.output();
  EXPECT_EQ(intruder.wait_exit(), 2);
  EXPECT_TRUE(fs::exists(other.home / ".keel" / "user.key")) << "the other user got a key of their own";
  const std::string reported = demo.wait_for("event auth_refused", 20);
  EXPECT_NE(reported.find("failed the CURVE handshake"), std::string::npos) << demo.output();
  // Nor does a client without any key get through (keel-cli --no-auth).
  ChildProcess plain(other.keel_cli({"send", "--endpoint", endpoint, "--timeout", "3", "--no-auth", "skip"}));
  EXPECT_NE(plain.wait_for("no acknowledgement", 20).find("requires keys"), std::string::npos) << plain.output();

  // Nor can they read the run: their keel-cli tail is refused at the handshake and says why,
  // and the run reports the refused telemetry connection.
  ChildProcess reader(other.keel_cli({"tail", "--endpoint", endpoint, "--timeout", "3", "--json"}));
  const std::string told = reader.wait_for("keel-cli: refused:", 20);
  EXPECT_NE(told.find("the run is probably another user's"), std::string::npos) << reader.output();
  EXPECT_EQ(reader.wait_exit(), 2);
  EXPECT_EQ(reader.output().find("\"type\""), std::string::npos) << "the other user read the run: " << reader.output();
  const std::string telemetry_refused = demo.wait_for("telemetry connection attempt", 20);
  EXPECT_NE(telemetry_refused.find("event auth_refused"), std::string::npos) << demo.output();
  ChildProcess plain_reader(other.keel_cli({"tail", "--endpoint", endpoint, "--timeout", "3", "--no-auth"}));
  EXPECT_NE(plain_reader.wait_for("requires keys", 20), "") << plain_reader.output();
  EXPECT_EQ(plain_reader.wait_exit(), 2);

  // The owner reads the run with no flag at all: the description, the events the probe kept
  // (the refusals above among them), then the steps.
  ChildProcess owner_reader({KEEL_CLI_PATH, "tail", "--endpoint", endpoint, "--timeout", "20", "--json", "-n", "20"});
  EXPECT_NE(owner_reader.wait_for("\"type\":\"step\"", 30), "") << owner_reader.output();
  // The rest is read to its end: 20 lines of 42 layers do not fit in the pipe.
  owner_reader.wait_for("no such line", 30);
  EXPECT_EQ(owner_reader.wait_exit(), 0);

  // And steers it with no flag at all.
  ChildProcess owner({KEEL_CLI_PATH, "send", "--endpoint", endpoint, "--timeout", "20", "skip"});
  const std::string ack_line = owner.wait_for("\"type\":\"ack\"", 30);
  ASSERT_NE(ack_line, "") << owner.output();
  EXPECT_TRUE(nlohmann::json::parse(ack_line)["ok"].get<bool>()) << ack_line;
  EXPECT_NE(demo.wait_for("event skip", 20), "") << demo.output();
  const std::string out = demo.output();
  EXPECT_EQ(out.find("event skip"), out.rfind("event skip")) << "only the owner's skip was applied: " << out;
}

}  // namespace
