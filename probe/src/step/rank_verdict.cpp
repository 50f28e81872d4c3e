// RankVerdict's two words (rank_verdict.hpp).
#include "rank_verdict.hpp"

namespace keel::probe {
namespace {

// The rank sits in the low 32 bits, complemented so that the lowest rank is the largest.
constexpr int kRankBits = 32;
constexpr int64_t kRankMask = (int64_t{1} << kRankBits) - 1;

}  // namespace

void RankVerdict::encode(int64_t* words) const {
  words[0] = static_cast<int64_t>(scaler);
  const int64_t reason = static_cast<int64_t>(skip);
  words[1] = reason == 0 ? 0 : (reason << kRankBits) | (kRankMask - (static_cast<int64_t>(rank) & kRankMask));
}

RankVerdict RankVerdict::decode(const int64_t* words) {
  RankVerdict v;
  const int64_t scaler = words[0];
  v.scaler = scaler == 0 ? Scaler::kClean : scaler == 1 ? Scaler::kProbeFailed : Scaler::kOverflow;
  if (words[1] == 0) return v;
  const int64_t reason = words[1] >> kRankBits;
  const bool known = reason >= static_cast<int64_t>(Skip::kSpike) && reason <= static_cast<int64_t>(Skip::kCommand);
  v.skip = known ? static_cast<Skip>(reason) : Skip::kCommand;
  v.rank = static_cast<int>(kRankMask - (words[1] & kRankMask));
  return v;
}

const char* skip_reason_of(RankVerdict::Skip skip) {
  switch (skip) {
    case RankVerdict::Skip::kApplied: return "";
    case RankVerdict::Skip::kSpike: return "spike";
    case RankVerdict::Skip::kNonfinite: return "nonfinite";
    case RankVerdict::Skip::kScaler: return "scaler";
    case RankVerdict::Skip::kCommand: return "command";
  }
  return "";
}

RankVerdict::Skip skip_of(const std::string& reason) {
  for (const auto skip : {RankVerdict::Skip::kSpike, RankVerdict::Skip::kNonfinite, RankVerdict::Skip::kScaler,
                          RankVerdict::Skip::kCommand}) {
    if (reason == skip_reason_of(skip)) return skip;
  }
  return RankVerdict::Skip::kApplied;
}

}  // namespace keel::probe
