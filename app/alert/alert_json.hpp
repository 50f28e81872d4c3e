// An alert as the one JSON object its command reads on standard input.
//
// What it is for: a script that pages someone, posts to a webhook or writes a log keys on the
// same fields for every alert. An event's alert is the event exactly as `keel-cli tail --json`
// prints it ("type": "event", rank, seq, run, model, step, kind, layer, detail, stamp_unix_ns,
// cause, warning: json_format.hpp), and "suppressed": how many alerts of its kind and rank the
// rate limit held back since the last one. A silence is the watcher's own: "type": "watcher"
// (no probe raised it), "kind": "silent", the same keys an event has (its step the last one the
// rank sent, its detail a sentence saying so), "silent_secs", and "suppressed".
// Threads: pure functions. Never: throws for any content (invalid UTF-8 is replaced).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "alert/alert.hpp"

namespace keel::app {

nlohmann::ordered_json alert_json(const Alert& alert);
// alert_json() as one line of text, without a newline.
std::string alert_json_line(const Alert& alert);

// The alert in one sentence: an event's detail (a warning without one: its numbers,
// warning_numbers.hpp); a silence's "no step or event from rank 0 of run demo-run for 120 s
// after step 4512; the trainer may have died, hung or ended".
std::string alert_detail(const Alert& alert);

}  // namespace keel::app
