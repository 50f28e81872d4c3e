#include "alert/silence_watch.hpp"

namespace keel::app {

SilenceWatch::Change SilenceWatch::heard(const Heard& heard, Clock::time_point now) {
  if (heard.rank < 0 || heard.rank >= kMaxRanks) return Change::kNone;
  const auto [it, first] = ranks_.try_emplace(heard.rank);
  Rank& rank = it->second;
  const bool again = rank.said;
  rank.last = heard;
  rank.at = now;
  rank.said = false;
  return first ? Change::kFirstHeard : again ? Change::kHeardAgain : Change::kNone;
}

std::vector<SilenceWatch::Silence> SilenceWatch::due(Clock::time_point now) {
  std::vector<Silence> silences;
  for (auto& [number, rank] : ranks_) {
    if (rank.said || now - rank.at < silent_after_) continue;
    rank.said = true;
    silences.push_back(Silence{rank.last, std::chrono::duration<double>(now - rank.at).count()});
  }
  return silences;
}

}  // namespace keel::app
