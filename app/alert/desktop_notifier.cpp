#include "alert/desktop_notifier.hpp"

#include <unistd.h>

#include <cstdlib>

#include "alert/alert_json.hpp"

namespace keel::app {
namespace {

bool set(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0';
}

// `name` in the folders of PATH, as the shell would find it; "" when none holds it.
std::string on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return "";
  const std::string folders = path;
  for (size_t begin = 0; begin <= folders.size();) {
    size_t end = folders.find(':', begin);
    if (end == std::string::npos) end = folders.size();
    const std::string folder = end > begin ? folders.substr(begin, end - begin) : ".";
    const std::string candidate = folder + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    begin = end + 1;
  }
  return "";
}

}  // namespace

std::optional<DesktopNotifier> DesktopNotifier::find(std::string& why_not) {
  if (!set("DISPLAY") && !set("WAYLAND_DISPLAY")) {
    why_not = "no desktop session: neither DISPLAY nor WAYLAND_DISPLAY is set";
    return std::nullopt;
  }
  std::string program = on_path("notify-send");
  if (program.empty()) {
    why_not = "notify-send is not on PATH (Debian and Ubuntu: apt install libnotify-bin)";
    return std::nullopt;
  }
  if (program.front() != '/') {
    // posix_spawn is given a path, not searched: make a relative PATH entry absolute.
    char cwd[4096];
    if (::getcwd(cwd, sizeof cwd) != nullptr) program = std::string(cwd) + "/" + program;
  }
  return DesktopNotifier(program);
}

std::vector<std::string> DesktopNotifier::command_for(const Alert& alert) const {
  std::string summary = "keel: " + alert.kind + ", rank " + std::to_string(alert.rank);
  if (!alert.run.empty()) summary += " of " + alert.run;
  std::string body = alert_detail(alert);
  if (alert.suppressed > 0) body += " (" + std::to_string(alert.suppressed) + " more held back since the last)";
  // "--" ends notify-send's options: a detail starting with '-' is still the body.
  return {program_, "--", summary, body};
}

}  // namespace keel::app
