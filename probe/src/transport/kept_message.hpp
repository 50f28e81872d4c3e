// KeptMessage: one message the publisher keeps for late readers (a `history` reply, a dump's
// telemetry): its topic (wire::kTopicStep, kTopicRun, kTopicEvent) and its payload as it was
// published, shared and immutable, so a copy of the ring costs pointers, not megabytes.
#pragma once

#include <memory>
#include <utility>
#include <vector>

namespace keel::probe {

using KeptMessage = std::pair<const char*, std::shared_ptr<const std::vector<char>>>;

}  // namespace keel::probe
