// --notify's notifier: found where the session has a display and notify-send, otherwise a reason
// the program says once; a found one's command line carries the alert.
#include "alert/desktop_notifier.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>

#include <gtest/gtest.h>

namespace keel::app {
namespace {

namespace fs = std::filesystem;

// Sets environment variables for one test and puts them back after it.
class Environment {
 public:
  ~Environment() {
    for (const auto& [name, value] : saved_) {
      if (value) {
        ::setenv(name.c_str(), value->c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
  }
  void set(const std::string& name, const char* value) {
    if (!saved_.count(name)) {
      const char* old = std::getenv(name.c_str());
      saved_[name] = old ? std::optional<std::string>(old) : std::nullopt;
    }
    if (value) {
      ::setenv(name.c_str(), value, 1);
    } else {
      ::unsetenv(name.c_str());
    }
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

fs::path folder(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("keel-notifier-" + std::to_string(::getpid())) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(DesktopNotifier, WithoutADisplayThereIsNoneAndItSaysWhy) {
  Environment environment;
  environment.set("DISPLAY", nullptr);
  environment.set("WAYLAND_DISPLAY", nullptr);
  std::string why_not;
  EXPECT_FALSE(DesktopNotifier::find(why_not));
  EXPECT_EQ(why_not, "no desktop session: neither DISPLAY nor WAYLAND_DISPLAY is set");
}

TEST(DesktopNotifier, WithoutNotifySendOnPathThereIsNoneAndItSaysWhy) {
  Environment environment;
  environment.set("WAYLAND_DISPLAY", "wayland-0");
  environment.set("PATH", folder("empty").c_str());
  std::string why_not;
  EXPECT_FALSE(DesktopNotifier::find(why_not));
  EXPECT_EQ(why_not.find("notify-send is not on PATH"), 0u) << why_not;
}

TEST(DesktopNotifier, NotifySendOnPathIsFoundAndGivenTheAlert) {
  const fs::path bin = folder("bin");
  const fs::path program = bin / "notify-send";
  std::ofstream(program) << "#!/bin/sh\nexit 0\n";
  ::chmod(program.c_str(), 0755);
  Environment environment;
  environment.set("DISPLAY", ":0");
  environment.set("WAYLAND_DISPLAY", nullptr);
  environment.set("PATH", ("/nonexistent:" + bin.string()).c_str());
  std::string why_not;
  const std::optional<DesktopNotifier> notifier = DesktopNotifier::find(why_not);
  ASSERT_TRUE(notifier) << why_not;
  EXPECT_EQ(notifier->program(), program.string());
  Alert alert;
  alert.kind = "first_nonfinite";
  alert.rank = 1;
  alert.run = "demo-run";
  alert.event = wire::Event{};
  alert.event->detail = "non-finite gradient values, in 1 layer";
  alert.suppressed = 2;
  EXPECT_EQ(notifier->command_for(alert),
            (std::vector<std::string>{program.string(), "--", "keel: first_nonfinite, rank 1 of demo-run",
                                      "non-finite gradient values, in 1 layer (2 more held back since the last)"}));
}

}  // namespace
}  // namespace keel::app
