// The commands alerts start, as real processes under /bin/sh: their input, how their failures
// are said, the timeout's kill reaching what the shell started, and no zombie left behind.
#include "alert/child_commands.hpp"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace keel::app {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = ChildCommands::Clock;

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("keel-child-commands-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path path = dir / name;
  fs::remove(path);
  return path;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> shell(const std::string& command) { return {"/bin/sh", "-c", command}; }

// Polls until every child ended (true) or `timeout` passed.
bool poll_until_done(ChildCommands& commands, std::chrono::milliseconds timeout) {
  const Clock::time_point until = Clock::now() + timeout;
  while (commands.running() > 0 && Clock::now() < until) {
    commands.poll(Clock::now());
    std::this_thread::sleep_for(10ms);
  }
  return commands.running() == 0;
}

// This process's children and their states ('Z': a zombie nobody reaped), from /proc.
std::vector<char> child_states() {
  std::vector<char> states;
  for (const fs::directory_entry& entry : fs::directory_iterator("/proc")) {
    const std::string stat = read_file(entry.path() / "stat");
    const size_t end_of_name = stat.rfind(')');
    if (end_of_name == std::string::npos) continue;
    char state = 0;
    int parent = 0;
    if (std::sscanf(stat.c_str() + end_of_name + 1, " %c %d", &state, &parent) == 2 && parent == ::getpid()) {
      states.push_back(state);
    }
  }
  return states;
}

struct Reports {
  std::vector<std::string> lines;
  ChildCommands::Report sink() {
    return [this](const std::string& line) { lines.push_back(line); };
  }
  std::string all() const {
    std::string text;
    for (const std::string& line : lines) text += line + "\n";
    return text;
  }
};

TEST(ChildCommands, ACommandReadsItsInputOnStdinAndSucceedsSilently) {
  Reports reports;
  ChildCommands commands(30, reports.sink());
  const fs::path out = scratch("input.json");
  const std::string input = "{\"kind\":\"warning\"}\n";
  ASSERT_TRUE(commands.start("alert command", shell("cat > '" + out.string() + "'"), input, Clock::now()));
  ASSERT_TRUE(poll_until_done(commands, 10s));
  EXPECT_EQ(read_file(out), input);
  EXPECT_TRUE(reports.lines.empty()) << reports.all();
  EXPECT_TRUE(child_states().empty()) << "reaped";
}

TEST(ChildCommands, AFailingCommandAndAMissingOneAreSaidWithTheirExitStatus) {
  Reports reports;
  ChildCommands commands(30, reports.sink());
  ASSERT_TRUE(commands.start("alert command for warning", shell("exit 3"), "{}", Clock::now()));
  ASSERT_TRUE(commands.start("alert command for rewind", shell("keel-no-such-command-anywhere"), "{}", Clock::now()));
  ASSERT_TRUE(poll_until_done(commands, 10s));
  ASSERT_EQ(reports.lines.size(), 2u) << reports.all();
  const std::string text = reports.all();
  EXPECT_NE(text.find("alert command for warning exited with status 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("alert command for rewind exited with status 127 (the shell found no such command)"),
            std::string::npos)
      << text;
  EXPECT_TRUE(child_states().empty()) << "no zombie left";
}

TEST(ChildCommands, AHangingCommandIsKilledAfterTheTimeoutWithWhatItsShellStarted) {
  Reports reports;
  ChildCommands commands(0.5, reports.sink());
  const fs::path pid_file = scratch("sleep.pid");
  const Clock::time_point started = Clock::now();
  ASSERT_TRUE(commands.start("alert command for silent",
                             shell("sleep 60 & echo $! > '" + pid_file.string() + "'; wait"), "", started));
  ASSERT_TRUE(poll_until_done(commands, 10s)) << "still running: not killed";
  EXPECT_GE(Clock::now() - started, 500ms);
  EXPECT_LT(Clock::now() - started, 5s);
  ASSERT_EQ(reports.lines.size(), 1u) << reports.all();
  EXPECT_EQ(reports.lines[0], "alert command for silent ran longer than 0.5 s and was killed");
  // The shell's own child was in its process group: killed too, not left sleeping for a minute.
  const pid_t sleeper = pid_t(std::atol(read_file(pid_file).c_str()));
  ASSERT_GT(sleeper, 0);
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i, std::this_thread::sleep_for(20ms)) {
    const std::string stat = read_file("/proc/" + std::to_string(sleeper) + "/stat");
    gone = stat.empty() || stat.find(") Z") != std::string::npos;
  }
  EXPECT_TRUE(gone) << "the shell's sleep " << sleeper << " survived the kill";
  EXPECT_TRUE(child_states().empty());
}

TEST(ChildCommands, FinishWaitsForTheQuickAndKillsTheRest) {
  Reports reports;
  ChildCommands commands(30, reports.sink());
  const fs::path out = scratch("quick.txt");
  ASSERT_TRUE(commands.start("quick", shell("sleep 0.1; echo done > '" + out.string() + "'"), "", Clock::now()));
  ASSERT_TRUE(commands.start("slow", shell("sleep 60"), "", Clock::now()));
  const Clock::time_point began = Clock::now();
  commands.finish(1500ms);
  EXPECT_LT(Clock::now() - began, 5s);
  EXPECT_EQ(read_file(out), "done\n");
  ASSERT_EQ(reports.lines.size(), 1u) << reports.all();
  EXPECT_EQ(reports.lines[0], "slow was still running at exit and was killed");
  EXPECT_EQ(commands.running(), 0u);
  EXPECT_TRUE(child_states().empty());
}

TEST(ChildCommands, NoMoreThanKMaxRunningRunAtOnce) {
  Reports reports;
  ChildCommands commands(30, reports.sink());
  for (size_t i = 0; i < ChildCommands::kMaxRunning; ++i) {
    ASSERT_TRUE(commands.start("sleeper", shell("sleep 60"), "", Clock::now()));
  }
  EXPECT_FALSE(commands.start("one too many", shell("true"), "", Clock::now()));
  ASSERT_EQ(reports.lines.size(), 1u);
  EXPECT_EQ(reports.lines[0], "one too many was not run: 16 alert commands are still running");
  commands.finish(0ms);
  EXPECT_TRUE(child_states().empty());
}

TEST(ChildCommands, AProgramThatCannotStartIsSaid) {
  Reports reports;
  ChildCommands commands(30, reports.sink());
  EXPECT_FALSE(commands.start("notify-send", {"/nonexistent/keel/notify-send", "x"}, "", Clock::now()));
  ASSERT_EQ(reports.lines.size(), 1u);
  EXPECT_EQ(reports.lines[0], "notify-send was not run: cannot start /nonexistent/keel/notify-send: No such file or directory");
}

}  // namespace
}  // namespace keel::app
