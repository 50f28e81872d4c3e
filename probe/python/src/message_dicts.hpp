// The wire messages as Python dicts: Probe.last_record (a step) and Probe.last_events.
//
// What it is for: a Python user reads what keel published with the names the wire, keel-cli's
// JSON and PROTOCOL.md use. Every field of the message's table (keel/wire/message_fields.hpp)
// is a key, whether or not the wire carried it; a map the message lacks (no scaler, no cause)
// is None. A step's float blocks are shaped for Python: "layers" and "module_values" map each
// metric sent to its list of values (by layer, by module), "buffer_absmax" is a list. Two
// shapes differ from the wire's list: "watches" is a dict by watched name. And two aliases are
// kept, because scripts read them by name since before the names were unified:
// "frozen_layers" and "unused_layers" (the wire's "frozen" and "unused").
// Threads: the training thread, with the GIL held.
#pragma once

#include <pybind11/pybind11.h>

#include "keel/wire/messages.hpp"

namespace keel::python {

pybind11::dict step_dict(const wire::StepRecord& record);
pybind11::dict event_dict(const wire::Event& event);

}  // namespace keel::python
