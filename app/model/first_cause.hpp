// What the dashboard says, without a click, about why a run's first unsafe step was unsafe.
//
// What it is for: the probe classifies each unsafe step (DESIGN §2.1) and sends one sentence
// with the first_nonfinite event (PROTOCOL §3.4). The events pane shows it above its rows, and
// the detail pane of a layer the cause is about shows it there too.
// Threads: plain functions of values (the UI thread).
#pragma once

#include <string>

#include "keel/wire/messages.hpp"

namespace keel::app {

// The event's cause sentence; from a probe that sends no cause (an older one), "" .
std::string cause_sentence(const wire::Event& first_nonfinite);

// Whether the event's cause is about `layer`: the layer the event names, or a parameter of the
// cause's module ("blocks.2.route" is about "blocks.2.route.weight", not "blocks.2.router.bias").
bool cause_is_about(const wire::Event& first_nonfinite, const std::string& layer);

}  // namespace keel::app
