// RankVerdict: one rank's verdict on a step as the ranks of a sharded job all-reduce it with
// MAX (skip_agreement.hpp), and the job's verdict read back from the result.
//
// Two int64 words. The scaler's word orders a clean step below a probe failure (the scale
// backs off only at the first of a run of them) below an overflow (it always backs off), so
// every rank's GradScaler takes the same update from the same state. The skip word holds the
// reason in decide()'s order of precedence (spike < nonfinite < scaler < command) above the
// rank's complement: MAX keeps the strongest reason and, among the ranks with it, the lowest.
// Threads: any. Never: allocates, throws.
#pragma once

#include <cstdint>
#include <string>

namespace keel::probe {

struct RankVerdict {
  static constexpr int kWords = 2;
  enum class Scaler : int64_t { kClean = 0, kProbeFailed = 1, kOverflow = 2 };
  enum class Skip : int64_t { kApplied = 0, kSpike = 1, kNonfinite = 2, kScaler = 3, kCommand = 4 };

  Scaler scaler = Scaler::kClean;
  Skip skip = Skip::kApplied;
  int rank = 0;   // the rank whose reason `skip` is (the lowest such rank, once agreed)

  void encode(int64_t* words) const;
  // The job's verdict from the all-reduced words. A word no rank's probe could have written
  // reads as the strongest value of its kind: nothing is applied on a verdict not understood.
  static RankVerdict decode(const int64_t* words);
};

// The StepOutcome::skip_reason of `skip` ("" when applied), and the reverse (an unknown
// reason reads as kApplied).
const char* skip_reason_of(RankVerdict::Skip skip);
RankVerdict::Skip skip_of(const std::string& reason);

}  // namespace keel::probe
