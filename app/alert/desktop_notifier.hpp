// DesktopNotifier: an alert as a desktop notification, where the desktop has a notifier.
//
// What it is for: `--notify` on a workstation: the alert pops up without any script. It runs
// `notify-send SUMMARY BODY` (libnotify's, found on PATH) through ChildCommands like any alert
// command. A machine without it (a server reached over ssh, no DISPLAY or WAYLAND_DISPLAY, no
// notify-send installed) gets no notifier, and find() says why, once, for the program to print.
// Threads: a plain value; find() reads the environment.
// Never: throws.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "alert/alert.hpp"

namespace keel::app {

class DesktopNotifier {
 public:
  // The notifier of this session, or nothing with `why_not` saying why ("no desktop session:
  // neither DISPLAY nor WAYLAND_DISPLAY is set", "notify-send is not on PATH ...").
  static std::optional<DesktopNotifier> find(std::string& why_not);

  // The notification's command line: notify-send, its summary ("keel: warning, rank 0") and
  // its body (the alert's detail).
  std::vector<std::string> command_for(const Alert& alert) const;
  const std::string& program() const { return program_; }

 private:
  explicit DesktopNotifier(std::string program) : program_(std::move(program)) {}
  std::string program_;   // notify-send's absolute path
};

}  // namespace keel::app
