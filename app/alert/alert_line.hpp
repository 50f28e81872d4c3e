// An alert as one readable line, for the watcher's standard output and the dashboard's log.
//
//   alert warning step 120 rank 0 run demo-run layer blocks.0.attn.qkv.weight: update ratio ... (3 held back)
//
// What it is for: a person reading a terminal (or a log file the watcher's output goes to) sees
// each alert once, on one line, whatever the command did with it. Text from the network is made
// safe for a terminal (table_format.hpp's terminal_safe).
// Threads: pure function. Never: throws.
#pragma once

#include <string>

#include "alert/alert.hpp"

namespace keel::app {

// Without a trailing newline.
std::string alert_line(const Alert& alert);

}  // namespace keel::app
