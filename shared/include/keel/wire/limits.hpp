// keel wire limits: the most a decoder accepts of each thing, so hostile bytes cannot make it
// allocate or loop without bound (PROTOCOL §8). The field table (message_fields.hpp) names the
// limit of each array field; the decoder enforces them.
// Threads: constants.
#pragma once

#include <cstddef>
#include <cstdint>

namespace keel::wire {

// Upper bound of one payload; anything larger is rejected before parsing.
inline constexpr size_t kMaxPayloadBytes = 64u << 20;
// Upper bounds on counts inside a payload (layers, watches, string bytes).
inline constexpr uint32_t kMaxLayers = 1u << 20;
inline constexpr uint32_t kMaxWatches = 1024;
// Most entries of a run description's policies_on.
inline constexpr uint32_t kMaxPolicies = 64;
// Other names of one layer's tensor in a run description (LayerInfo::aliases).
inline constexpr uint32_t kMaxAliases = 64;
// Modules a run description names for its step records' rollups (RunDescription::modules).
inline constexpr uint32_t kMaxModules = 65536;
// Dimensions of one layer's shape in a run description: more than any real tensor has.
inline constexpr uint32_t kMaxShapeDims = 64;
// Param groups whose lr a step record carries (StepRecord::group_lrs).
inline constexpr uint32_t kMaxGroupLrs = 1024;
inline constexpr uint32_t kMaxStringBytes = 64u << 10;

}  // namespace keel::wire
