// RankVerdict's words (rank_verdict.hpp).
#include "rank_verdict.hpp"

namespace keel::probe {
namespace {

// A rank sits in the low 32 bits, complemented so that the lowest rank is the largest.
constexpr int kRankBits = 32;
constexpr int64_t kRankMask = (int64_t{1} << kRankBits) - 1;

int64_t rank_bits(int rank) { return kRankMask - (static_cast<int64_t>(rank) & kRankMask); }

// A snapshot's step (a rewind's, a hold's), complemented below this so that the lowest step is
// the largest word.
constexpr int64_t kStepCeiling = int64_t{1} << 62;
int rank_of(int64_t word) { return static_cast<int>(kRankMask - (word & kRankMask)); }

}  // namespace

void RankVerdict::encode(int64_t* words) const {
  words[0] = static_cast<int64_t>(scaler);
  const int64_t reason = static_cast<int64_t>(skip);
  words[1] = reason == 0 ? 0 : (reason << kRankBits) | rank_bits(rank);
  words[2] = static_cast<int64_t>(auto_dump);
  words[3] = command_dump ? 1 : 0;
  words[4] = rewind_to < 0 ? 0 : kStepCeiling - rewind_to;
  words[5] = rewind_to < 0 ? 0 : policy_rewind;
  words[6] = hold_snapshots ? 1 : 0;
  words[7] = hold_before < 0 ? 0 : kStepCeiling - hold_before;
}

RankVerdict RankVerdict::decode(const int64_t* words) {
  RankVerdict v;
  v.scaler = words[0] == 0 ? Scaler::kClean : words[0] == 1 ? Scaler::kProbeFailed : Scaler::kOverflow;
  if (words[1] != 0) {
    const int64_t reason = words[1] >> kRankBits;
    const bool known = reason >= static_cast<int64_t>(Skip::kSpike) && reason <= static_cast<int64_t>(Skip::kRewind);
    v.skip = known ? static_cast<Skip>(reason) : Skip::kCommand;
    v.rank = rank_of(words[1]);
  }
  v.auto_dump = words[2] == 0 ? AutoDump::kNone : words[2] == 1 ? AutoDump::kNonfiniteBuffer : AutoDump::kNonfinite;
  v.command_dump = words[3] != 0;
  // A word no probe writes (beyond the ceiling, or a negative step) rewinds nowhere: a rewind
  // needs a snapshot that exists, and each rank checks its own.
  if (words[4] > 0 && words[4] <= kStepCeiling) {
    v.rewind_to = kStepCeiling - words[4];
    v.policy_rewind = words[5];
  }
  v.hold_snapshots = words[6] != 0;
  if (words[7] > 0 && words[7] <= kStepCeiling) v.hold_before = kStepCeiling - words[7];
  return v;
}

void RankVerdict::encode_refusal(bool refused, int rank, int64_t* words) {
  for (int i = 0; i < kWords; ++i) words[i] = 0;
  if (refused) words[0] = (int64_t{1} << kRankBits) | rank_bits(rank);
}

int RankVerdict::refusing_rank(const int64_t* words) { return words[0] == 0 ? -1 : rank_of(words[0]); }

const char* skip_reason_of(RankVerdict::Skip skip) {
  switch (skip) {
    case RankVerdict::Skip::kApplied: return "";
    case RankVerdict::Skip::kSpike: return "spike";
    case RankVerdict::Skip::kNonfinite: return "nonfinite";
    case RankVerdict::Skip::kScaler: return "scaler";
    case RankVerdict::Skip::kCommand: return "command";
    case RankVerdict::Skip::kRewind: return "rewind";
  }
  return "";
}

RankVerdict::Skip skip_of(const std::string& reason) {
  for (const auto skip : {RankVerdict::Skip::kSpike, RankVerdict::Skip::kNonfinite, RankVerdict::Skip::kScaler,
                          RankVerdict::Skip::kCommand, RankVerdict::Skip::kRewind}) {
    if (reason == skip_reason_of(skip)) return skip;
  }
  return RankVerdict::Skip::kApplied;
}

const char* dump_reason_of(RankVerdict::AutoDump dump) {
  switch (dump) {
    case RankVerdict::AutoDump::kNone: return "";
    case RankVerdict::AutoDump::kNonfiniteBuffer: return "nonfinite_buffer";
    case RankVerdict::AutoDump::kNonfinite: return "nonfinite";
  }
  return "";
}

}  // namespace keel::probe
