// SeriesHistory storage: append into the recent window and the min/max pyramid, coarsening,
// and memory accounting. The queries live in series_query.cpp.
#include "model/series_history.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "model/series_layout.hpp"

namespace keel::app {
namespace {

// Grows a vector's capacity by doubling but never past `limit`, so that capacity (what
// bytes_used() counts) stays within max_bytes() instead of depending on the library's growth
// policy.
template <typename T>
void reserve_for(std::vector<T>& v, size_t needed, size_t limit) {
  if (needed <= v.capacity()) return;
  v.reserve(std::min(limit, std::max(needed, std::max<size_t>(8, 2 * v.capacity()))));
}

}  // namespace

SeriesHistory::SeriesHistory(int64_t origin_step, const ModelConfig& config)
    : origin_step_(std::clamp(origin_step, -series_layout::kStepLimit,
                              series_layout::kStepLimit)),
      last_step_(origin_step_ - 1),
      recent_capacity_(series_layout::recent_capacity(config)),
      archive_buckets_(series_layout::archive_buckets(config)) {
  const int level_count = series_layout::level_count(archive_buckets_);
  recent_floor_ = origin_step_;
  levels_.resize(static_cast<size_t>(level_count));
  for (int k = 0; k < level_count; ++k) {
    levels_[static_cast<size_t>(k)].capacity_limit =
        static_cast<size_t>(archive_buckets_ >> (2 * k));
  }
}

bool SeriesHistory::append(int64_t step, float value) {
  if (step <= last_step_ || step > series_layout::kStepLimit) return false;
  // One NaN bit pattern in storage: the absent marker is another NaN payload and must never
  // be produced by a sample.
  if (std::isnan(value)) value = std::numeric_limits<float>::quiet_NaN();
  append_recent(step, value);

  const int64_t offset = step - origin_step_;
  while ((offset >> base_shift_) >= archive_buckets_) coarsen();
  if (!empty()) {
    const int64_t last_offset = last_step_ - origin_step_;
    if ((offset >> base_shift_) != (last_offset >> base_shift_)) close_buckets(last_offset, offset);
  }
  levels_[0].open.add_value(value);

  last_step_ = step;
  last_value_ = value;
  return true;
}

void SeriesHistory::append_recent(int64_t step, float value) {
  const int64_t mask = recent_capacity_ - 1;
  const int64_t offset = step - origin_step_;
  const size_t size = recent_.size();
  if (size < static_cast<size_t>(recent_capacity_)) {
    const size_t needed = static_cast<size_t>(std::min(offset + 1, recent_capacity_));
    if (needed > size) {
      reserve_for(recent_, needed, static_cast<size_t>(recent_capacity_));
      recent_.resize(needed, series_layout::absent());
    }
  }
  // Slots of skipped steps may still hold samples from one lap ago.
  for (int64_t s = std::max(last_step_ + 1, step - recent_capacity_ + 1); s < step; ++s) {
    recent_[static_cast<size_t>((s - origin_step_) & mask)] = series_layout::absent();
  }
  recent_[static_cast<size_t>(offset & mask)] = value;
}

void SeriesHistory::close_buckets(int64_t last_offset, int64_t offset) {
  int shift = base_shift_;
  for (size_t k = 0; k < levels_.size(); ++k, shift += 2) {
    const int64_t closing = last_offset >> shift;
    if (closing == (offset >> shift)) return;  // this level and all above stay open
    Level& level = levels_[k];
    const size_t index = static_cast<size_t>(closing);
    // Buckets between the last closed one and this one saw no step: written empty.
    reserve_for(level.lo, index + 1, level.capacity_limit);
    reserve_for(level.hi, index + 1, level.capacity_limit);
    reserve_for(level.flags, index + 1, level.capacity_limit);
    level.lo.resize(index + 1, std::numeric_limits<float>::infinity());
    level.hi.resize(index + 1, -std::numeric_limits<float>::infinity());
    level.flags.resize(index + 1, 0);
    level.lo[index] = level.open.lo;
    level.hi[index] = level.open.hi;
    level.flags[index] = static_cast<uint8_t>(level.open.flags);
    if (k + 1 < levels_.size()) {
      levels_[k + 1].open.add_bucket(level.open.lo, level.open.hi, level.open.flags);
    }
    level.open = SummaryBuilder{};
  }
}

void SeriesHistory::coarsen() {
  // Pairs merge at every level, so level k stays 4^k base buckets wide and each level's
  // bucket count halves. Min, max and flag-OR are exact under merging (and idempotent, so a
  // sample counted in two places is still counted right): nothing is lost but resolution.
  for (size_t k = 0; k < levels_.size(); ++k) {
    Level& level = levels_[k];
    const size_t n = level.lo.size();
    size_t merged = (n + 1) / 2;
    for (size_t j = 0; j < merged; ++j) {
      const size_t a = 2 * j;
      const size_t b = std::min(a + 1, n - 1);
      level.lo[j] = std::min(level.lo[a], level.lo[b]);
      level.hi[j] = std::max(level.hi[a], level.hi[b]);
      level.flags[j] = static_cast<uint8_t>(level.flags[a] | level.flags[b]);
    }
    // The last closed bucket may pair with the open one: the merged bucket is then open.
    if (!empty() && merged > 0 && static_cast<int64_t>(merged - 1) == (open_index(k) >> 1)) {
      --merged;
      level.open.add_bucket(level.lo[merged], level.hi[merged], level.flags[merged]);
    }
    level.lo.resize(merged);
    level.hi.resize(merged);
    level.flags.resize(merged);
  }
  ++base_shift_;
}

int64_t SeriesHistory::open_index(size_t k) const {
  return (last_step_ - origin_step_) >> (base_shift_ + 2 * static_cast<int>(k));
}

SummaryBuilder SeriesHistory::open_summary(size_t k) const {
  SummaryBuilder out;
  for (size_t i = 0; i <= k; ++i) {
    out.add_bucket(levels_[i].open.lo, levels_[i].open.hi, levels_[i].open.flags);
  }
  return out;
}

int64_t SeriesHistory::recent_first_step() const {
  return std::max(recent_floor_, last_step_ - recent_capacity_ + 1);
}

void SeriesHistory::drop_after(int64_t step) {
  if (step >= last_step_) return;
  if (step < origin_step_) step = origin_step_ - 1;
  const int64_t old_recent_first = recent_first_step();
  // The forgotten steps' slots: absent, so that no query reads them as the steps a lap back.
  const int64_t mask = recent_capacity_ - 1;
  for (int64_t s = std::max(step + 1, old_recent_first); s <= last_step_; ++s) {
    const auto slot = static_cast<size_t>((s - origin_step_) & mask);
    if (slot < recent_.size()) recent_[slot] = series_layout::absent();
  }
  drop_buckets_after(step, old_recent_first);
  recent_floor_ = std::min(std::max(old_recent_first, origin_step_), step + 1);
  last_step_ = step;
  float value = std::numeric_limits<float>::quiet_NaN();
  last_value_ = value_at(step, &value) ? value : std::numeric_limits<float>::quiet_NaN();
}

void SeriesHistory::drop_buckets_after(int64_t step, int64_t old_recent_first) {
  if (step < origin_step_) {
    for (Level& level : levels_) {
      level.lo.clear();
      level.hi.clear();
      level.flags.clear();
      level.open = SummaryBuilder{};
    }
    return;
  }
  const int64_t offset = step - origin_step_;
  int shift = base_shift_;
  for (size_t k = 0; k < levels_.size(); ++k, shift += 2) {
    Level& level = levels_[k];
    const auto open = static_cast<size_t>(offset >> shift);
    SummaryBuilder rebuilt;
    if (k == 0) {
      const int64_t bucket_first = origin_step_ + (static_cast<int64_t>(open) << shift);
      if (bucket_first < old_recent_first) {
        // Older than the window: its extremes, forgotten steps included (see drop_after()).
        if (open < level.lo.size()) rebuilt.add_bucket(level.lo[open], level.hi[open], level.flags[open]);
        else rebuilt = level.open;
      }
      const int64_t mask = recent_capacity_ - 1;
      for (int64_t s = std::max(bucket_first, old_recent_first); s <= step; ++s) {
        const float value = recent_[static_cast<size_t>((s - origin_step_) & mask)];
        if (!series_layout::is_absent(value)) rebuilt.add_value(value);
      }
    } else {
      // The closed buckets below that fall in this open one; the open ones below are folded in
      // at query time (open_summary()).
      const Level& below = levels_[k - 1];
      for (size_t j = open * 4; j < below.lo.size(); ++j) rebuilt.add_bucket(below.lo[j], below.hi[j], below.flags[j]);
    }
    if (level.lo.size() > open) {
      level.lo.resize(open);
      level.hi.resize(open);
      level.flags.resize(open);
    }
    level.open = rebuilt;
  }
}

bool SeriesHistory::value_at(int64_t step, float* value) const {
  if (empty() || step > last_step_ || step < recent_first_step()) return false;
  const float stored = recent_[static_cast<size_t>((step - origin_step_) & (recent_capacity_ - 1))];
  if (series_layout::is_absent(stored)) return false;
  *value = stored;
  return true;
}

size_t SeriesHistory::bytes_used() const {
  size_t bytes = sizeof(SeriesHistory) + recent_.capacity() * sizeof(float) +
                 levels_.capacity() * sizeof(Level);
  for (const Level& level : levels_) {
    bytes += (level.lo.capacity() + level.hi.capacity()) * sizeof(float) +
             level.flags.capacity() * sizeof(uint8_t);
  }
  return bytes;
}

size_t SeriesHistory::max_bytes(const ModelConfig& config) {
  const int64_t buckets = series_layout::archive_buckets(config);
  const int level_count = series_layout::level_count(buckets);
  size_t bytes = sizeof(SeriesHistory) +
                 static_cast<size_t>(series_layout::recent_capacity(config)) * sizeof(float) +
                 static_cast<size_t>(level_count) * sizeof(Level);
  for (int k = 0; k < level_count; ++k) {
    bytes += static_cast<size_t>(buckets >> (2 * k)) * (2 * sizeof(float) + sizeof(uint8_t));
  }
  return bytes;
}

ModelConfig SeriesHistory::config_within(const ModelConfig& config, size_t bytes) {
  ModelConfig fitted = config;
  constexpr int64_t kLeastRecent = 16, kLeastBuckets = 8;
  while (max_bytes(fitted) > bytes && (fitted.recent_steps > kLeastRecent || fitted.archive_buckets > kLeastBuckets)) {
    const bool recent_weighs_more =
        fitted.recent_steps * 4 >= fitted.archive_buckets * 12 || fitted.archive_buckets <= kLeastBuckets;
    if (recent_weighs_more && fitted.recent_steps > kLeastRecent) {
      fitted.recent_steps /= 2;
    } else {
      fitted.archive_buckets /= 2;
    }
  }
  return fitted;
}

}  // namespace keel::app
