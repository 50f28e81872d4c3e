// RankVerdict: one rank's verdict on a step as the ranks of a sharded job all-reduce it with
// MAX (skip_agreement.hpp), and the job's verdict read back from the result.
//
// Eight int64 words. The scaler's word orders a clean step below a probe failure (the scale
// backs off only at the first of a run of them) below an overflow (it always backs off), so
// every rank's GradScaler takes the same update from the same state. The skip word holds the
// reason in decide()'s order of precedence (spike < nonfinite < scaler < command < rewind)
// above the rank's complement: MAX keeps the strongest reason and, among the ranks with it, the
// lowest.
// The dump words say whether any rank's automatic dump is due (and of what: buffers <
// gradients) and whether any rank was asked for one by command: a sharded model's state_dict()
// is a collective, so the ranks dump together or not at all. When they are to dump, a second
// all-reduce (the refusal words) says whether any rank cannot, and which is the lowest.
// The rewind words say whether any rank rewinds this step, and to which snapshot: the oldest
// any rank asks for (its step complemented, so MAX keeps the lowest), and the highest count of
// the rewind policy's rewinds among them (0: a command's), so every rank rewinds the same way
// (a data-parallel rank's own loss may diverge a step before another's). The seventh word says
// whether any rank holds its snapshots back (a divergence in progress, a rewind pending), so
// that every rank keeps the same snapshots and has the one the job rewinds to. The last says
// whether any rank's early warning asks the job to keep the newest snapshot from before a step
// out of the rotation (StateSnapshots::hold), and the earliest such step (complemented, as the
// rewind's): every rank holds the same one, in the same step.
// Threads: any. Never: allocates, throws.
#pragma once

#include <cstdint>
#include <string>

namespace keel::probe {

struct RankVerdict {
  static constexpr int kWords = 8;
  enum class Scaler : int64_t { kClean = 0, kProbeFailed = 1, kOverflow = 2 };
  enum class Skip : int64_t { kApplied = 0, kSpike = 1, kNonfinite = 2, kScaler = 3, kCommand = 4, kRewind = 5 };
  enum class AutoDump : int64_t { kNone = 0, kNonfiniteBuffer = 1, kNonfinite = 2 };

  Scaler scaler = Scaler::kClean;
  Skip skip = Skip::kApplied;
  int rank = 0;   // the rank whose reason `skip` is (the lowest such rank, once agreed)
  AutoDump auto_dump = AutoDump::kNone;
  bool command_dump = false;
  int64_t rewind_to = -1;       // the snapshot's step this step rewinds to; -1: no rewind
  int64_t policy_rewind = 0;    // the rewind policy's how-manieth rewind it is; 0: a command's
  bool hold_snapshots = false;  // no snapshot is to be taken as this step ends
  int64_t hold_before = -1;     // keep the newest snapshot from before this step; -1: none asked

  void encode(int64_t* words) const;
  // The job's verdict from the all-reduced words. A word no rank's probe could have written
  // reads as the strongest value of its kind: nothing is applied on a verdict not understood.
  static RankVerdict decode(const int64_t* words);

  // The refusal words: whether this rank (`rank`) cannot take its part of a dump every rank
  // is to take; once all-reduced, the lowest rank that cannot, or -1 when every rank can.
  static void encode_refusal(bool refused, int rank, int64_t* words);
  static int refusing_rank(const int64_t* words);
};

// The StepOutcome::skip_reason of `skip` ("" when applied), and the reverse (an unknown
// reason reads as kApplied).
const char* skip_reason_of(RankVerdict::Skip skip);
RankVerdict::Skip skip_of(const std::string& reason);
// The dump's reason as its name and events say it: "nonfinite", "nonfinite_buffer" ("" for none).
const char* dump_reason_of(RankVerdict::AutoDump dump);

}  // namespace keel::probe
