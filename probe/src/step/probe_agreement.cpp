// Probe::Impl's agreement of a sharded job's ranks on each step's verdict (skip_agreement.hpp,
// DESIGN §9): this rank's verdict handed to the others after decide(), the job's taken back.
#include "probe_impl.hpp"

namespace keel::probe {

void Probe::Impl::agree_skips(SkipAgreement agreement) {
  skip_agreement_ = std::move(agreement);
  // Made once: the step allocates nothing of its own.
  if (skip_agreement_ && !verdict_words_.defined()) verdict_words_ = torch::zeros({RankVerdict::kWords}, torch::kLong);
}

void Probe::Impl::agree_with_ranks(Reduction& r, StepOutcome& outcome) {
  const bool scaler_active = scaler_ && scaler_->enabled();
  RankVerdict own;
  own.rank = options_.rank;
  if (scaler_active && r.scaler_found_inf) {
    own.scaler = scaler_->probe_failed() ? RankVerdict::Scaler::kProbeFailed : RankVerdict::Scaler::kOverflow;
  }
  own.skip = outcome.applied ? RankVerdict::Skip::kApplied : skip_of(outcome.skip_reason);
  agreed_ = own;
  try {
    own.encode(verdict_words_.data_ptr<int64_t>());
    skip_agreement_(verdict_words_);
    if (verdict_words_.device() != torch::kCPU || verdict_words_.scalar_type() != torch::kLong ||
        verdict_words_.numel() != RankVerdict::kWords) {
      throw std::runtime_error("the agreement left the verdict as a tensor other than the two int64 words it was given");
    }
    agreed_ = RankVerdict::decode(verdict_words_.data_ptr<int64_t>());
  } catch (const std::exception& e) {
    verdict_words_ = torch::zeros({RankVerdict::kWords}, torch::kLong);
    report_probe_error("agreeing the step's verdict with the other ranks", e.what(),
                       "this rank's own verdict stands: " + consequence_of(outcome));
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
}

}  // namespace keel::probe
