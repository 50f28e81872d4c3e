#include "ui/verbose_log.hpp"

#include <atomic>
#include <cstdarg>
#include <cstdio>

namespace keel::app::ui {
namespace {

std::atomic<bool> verbose{false};

}  // namespace

void set_verbose_log(bool on) { verbose.store(on); }

bool verbose_log_on() { return verbose.load(); }

void verbose_log(const char* format, ...) {
  if (!verbose.load()) return;
  char line[1024];
  va_list args;
  va_start(args, format);
  std::vsnprintf(line, sizeof line, format, args);
  va_end(args);
  std::printf("%s\n", line);
  std::fflush(stdout);
}

}  // namespace keel::app::ui
