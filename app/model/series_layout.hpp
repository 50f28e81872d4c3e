// Internal to app/model: the storage constants SeriesHistory's two .cpp files share (the
// absent marker, size normalisation). Not part of the model's public API.
// Threads: constants and pure functions. Never: allocates or throws.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "model/model_config.hpp"

namespace keel::app::series_layout {

// Steps beyond +-2^62 are refused so that offsets and bucket arithmetic never overflow.
constexpr int64_t kStepLimit = int64_t{1} << 62;

// A recent-window slot whose step has no sample. A NaN with a payload no sample can carry
// (append() stores every NaN as the one default quiet NaN), so it costs no extra bytes.
constexpr uint32_t kAbsentBits = 0x7fc0deadu;

inline float absent() {
  float value;
  std::memcpy(&value, &kAbsentBits, sizeof value);
  return value;
}

inline bool is_absent(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits == kAbsentBits;
}

inline int64_t round_up_pow2(int64_t value, int64_t low, int64_t high) {
  value = std::clamp(value, low, high);
  int64_t pow2 = 1;
  while (pow2 < value) pow2 <<= 1;
  return pow2;
}

inline int64_t recent_capacity(const ModelConfig& config) {
  return round_up_pow2(config.recent_steps, 16, int64_t{1} << 24);
}

inline int64_t archive_buckets(const ModelConfig& config) {
  return round_up_pow2(config.archive_buckets, 8, int64_t{1} << 24);
}

// Levels of 4x above the base while a level still has at least 2 buckets to merge.
inline int level_count(int64_t archive_buckets) {
  int count = 1;
  while ((archive_buckets >> (2 * count)) >= 2) ++count;
  return count;
}

}  // namespace keel::app::series_layout
