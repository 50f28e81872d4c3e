// Probe::Impl's agreement of a sharded job's ranks on each step's verdict (skip_agreement.hpp,
// DESIGN §9): this rank's verdict handed to the others after decide(), the job's taken back.
#include <algorithm>
#include <string>

#include "probe_impl.hpp"

namespace keel::probe {
namespace {

// The agreement run on `words`, which it must leave as the int64 CPU words it was given.
void all_reduce_words(const SkipAgreement& agreement, torch::Tensor& words) {
  agreement(words);
  if (words.device() != torch::kCPU || words.scalar_type() != torch::kLong || words.numel() != RankVerdict::kWords) {
    throw std::runtime_error("the agreement left the verdict as a tensor other than the int64 words it was given");
  }
}

}  // namespace

void Probe::Impl::agree_skips(SkipAgreement agreement) {
  skip_agreement_ = std::move(agreement);
  // Made once: the step allocates nothing of its own.
  if (skip_agreement_ && !verdict_words_.defined()) verdict_words_ = torch::zeros({RankVerdict::kWords}, torch::kLong);
}

void Probe::Impl::agree_with_ranks(Reduction& r, StepOutcome& outcome, DumpDue& dump, bool& rewinding) {
  const bool scaler_active = scaler_ && scaler_->enabled();
  RankVerdict own;
  own.rank = options_.rank;
  if (scaler_active && r.scaler_found_inf) {
    own.scaler = scaler_->probe_failed() ? RankVerdict::Scaler::kProbeFailed : RankVerdict::Scaler::kOverflow;
  }
  own.skip = outcome.applied ? RankVerdict::Skip::kApplied : skip_of(outcome.skip_reason);
  own.auto_dump = dump.automatic;
  own.command_dump = dump.command;
  own.hold_snapshots = holds_snapshots();
  own.hold_before = hold_requested_;
  if (rewinding) {
    own.rewind_to = control_.rewind_requested()->to_step;
    own.policy_rewind = control_.rewind_requested()->policy_rewind;
  }
  agreed_ = own;
  try {
    own.encode(verdict_words_.data_ptr<int64_t>());
    all_reduce_words(skip_agreement_, verdict_words_);
    agreed_ = RankVerdict::decode(verdict_words_.data_ptr<int64_t>());
    // Asked, and answered: a failed agreement asks again at the next step.
    hold_requested_ = -1;
  } catch (const std::exception& e) {
    verdict_words_ = torch::zeros({RankVerdict::kWords}, torch::kLong);
    std::string consequence = "this rank's own verdict stands: " + StepDecision::consequence_of(outcome);
    if (dump.command || dump.automatic != RankVerdict::AutoDump::kNone) {
      consequence += "; its dump is not taken this step (the other ranks may not be taking theirs)";
    }
    dump = DumpDue{};
    report_probe_error("agreeing the step's verdict with the other ranks", e.what(), consequence);
    return;
  }
  // Only ever stronger than this rank's own: MAX cannot lower it.
  if (scaler_active && agreed_.scaler > own.scaler) {
    scaler_->take_agreed_verdict(/*found_inf=*/true, agreed_.scaler == RankVerdict::Scaler::kProbeFailed);
    r.scaler_found_inf = true;
  }
  if (outcome.applied && agreed_.skip != RankVerdict::Skip::kApplied) {
    outcome.applied = false;
    outcome.skip_reason = "other_rank";
  }
  // A sharded model's state_dict() is a collective: every rank dumps, or none.
  dump.automatic = agreed_.auto_dump;
  dump.command = agreed_.command_dump;
  if (agreed_.rewind_to >= 0) join_agreed_rewind(outcome, rewinding);
  // Every rank, in this step, before the step's snapshot: the ranks keep the same snapshots.
  if (agreed_.hold_before >= 0) snapshots_.hold(agreed_.hold_before);
}

void Probe::Impl::join_agreed_rewind(StepOutcome& outcome, bool& rewinding) {
  const std::optional<RemoteControl::RewindRequest>& own = control_.rewind_requested();
  RemoteControl::RewindRequest joined{agreed_.rewind_to, step_, "", agreed_.policy_rewind};
  if (rewinding && own->to_step == agreed_.rewind_to) {
    joined.why = own->why;
  } else if (agreed_.policy_rewind > 0) {
    joined.why = "another rank's rewind policy, " + std::to_string(agreed_.policy_rewind) + " of at most " +
                 std::to_string(options_.rewind_max) + "; the ranks rewind together";
  } else {
    joined.why = "a command to another rank; the ranks rewind together";
  }
  control_.join_rewind(std::move(joined));
  // The cap and the learning-rate cut count the job's rewinds, not this rank's alone.
  policy_rewinds_ = std::max(policy_rewinds_, agreed_.policy_rewind);
  rewinding = true;
  outcome.applied = false;
  outcome.skip_reason = "rewind";
}

std::string Probe::Impl::agree_on_dump(const std::string& error) {
  try {
    int64_t* words = verdict_words_.data_ptr<int64_t>();
    RankVerdict::encode_refusal(!error.empty(), options_.rank, words);
    all_reduce_words(skip_agreement_, verdict_words_);
    const int refusing = RankVerdict::refusing_rank(verdict_words_.data_ptr<int64_t>());
    if (!error.empty() || refusing < 0) return error;
    return "rank " + std::to_string(refusing) + " could not take its part, and the ranks of a sharded job dump together";
  } catch (const std::exception& e) {
    verdict_words_ = torch::zeros({RankVerdict::kWords}, torch::kLong);
    return std::string("the ranks could not agree on it: ") + e.what();
  }
}

}  // namespace keel::probe
