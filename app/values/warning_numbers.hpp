// The numbers of a `warning` event's map (PROTOCOL §3.4) in words, one wording for every place
// that shows them: the dashboard's banner, keel-cli's tail and summary, and the alerts.
//
// What it is for: `per_step` means a different thing per signal (how much the natural log of
// the value rises a step; nats a step for log_z; how much it falls for loss_scale), so the
// reading is written once here rather than guessed in each view.
// Threads: pure functions. Never: throws for any map content (a non-finite or unknown signal is
// shown as it is).
#pragma once

#include <string>

#include "keel/wire/messages.hpp"

namespace keel::app {

// "0.081, 2.6x its baseline 0.031" (log_z: "9.2, 1.3 above its baseline 7.9"); the value alone
// when the baseline is 0 or not finite.
std::string warning_level_text(const keel::wire::Warning& warning);
// "rising 4.1% a step" (log_z: "rising 0.02 a step"; loss_scale: "falling 12% a step").
std::string warning_trend_text(const keel::wire::Warning& warning);
// "may diverge in ~35 steps", or "no estimate of when" (lead_steps -1).
std::string warning_lead_text(const keel::wire::Warning& warning);
// The three joined: "update_ratio 0.081, 2.6x its baseline 0.031, rising 4.1% a step; may
// diverge in ~35 steps".
std::string warning_numbers_text(const keel::wire::Warning& warning);

}  // namespace keel::app
