#include "alert/alert_rate_limit.hpp"

namespace keel::app {

AlertRateLimit::Verdict AlertRateLimit::admit(const std::string& kind, int32_t rank, Clock::time_point now) {
  const int32_t key_rank = rank >= 0 && rank < kMaxRanks ? rank : -1;
  const auto [it, first] = entries_.try_emplace({kind, key_rank});
  Entry& entry = it->second;
  if (!first && now - entry.last_raised < interval_) {
    ++entry.held_back;
    return Verdict{};
  }
  const Verdict verdict{true, entry.held_back};
  entry.last_raised = now;
  entry.held_back = 0;
  return verdict;
}

}  // namespace keel::app
