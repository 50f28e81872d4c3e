// message_bytes: about how much memory a decoded message holds, for the bounds kept by bytes
// rather than by count (the Receiver's queue, AppCore's replay of live messages).
// What it is for: a count bounds nothing when one message may hold a 200,000-layer record.
// The figure is the message's own size plus what every field of its table holds (strings,
// vectors and their elements, nested maps; keel/wire/message_fields.hpp), not the
// allocator's rounding: close enough to bound by, never a large undercount.
// Threads: a pure function. Never: allocates or throws.
#pragma once

#include <cstddef>

#include "keel/wire/messages.hpp"

namespace keel::app {

size_t message_bytes(const wire::Message& message);

}  // namespace keel::app
