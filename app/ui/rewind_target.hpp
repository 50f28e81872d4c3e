// keel app rewind_target: the step a Rewind confirmation's field asks for.
//
// What it is for: the dashboard's Rewind confirmation (control_panel.cpp) takes the step to go
// back to as typed text; this reads it as a rewind command's to_step, or says it is not one, so
// that nothing is sent on a typo.
// Threads: any. Never: throws.
#pragma once

#include <cstdint>
#include <optional>

namespace keel::app::ui {

// -1 (the newest snapshot) for nothing or blanks; a step at or after 0 for its digits, blanks
// around them allowed; nullopt for anything else (a sign, letters, a number beyond int64).
std::optional<int64_t> rewind_target(const char* typed);

}  // namespace keel::app::ui
