// The dashboard's log of what it drew and did: the geometry of its controls and heatmap rows
// (so a test, or a user scripting xdotool, can click them), selections, events as they
// arrive, commands and their answers. Written to stdout, a line at a time, only with
// --verbose: a user's terminal gets no debug output unless asked.
// Threads: any; each line is written whole.
#pragma once

namespace keel::app::ui {

void set_verbose_log(bool on);
bool verbose_log_on();
// printf-style; a line ("\n" added) when the log is on, nothing otherwise.
void verbose_log(const char* format, ...) __attribute__((format(printf, 1, 2)));

}  // namespace keel::app::ui
