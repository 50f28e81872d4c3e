// Probe::Impl's rewind (docs/rewind.md): the snapshots taken as steps end (StateSnapshots), and
// a rewind a command asked for, taken in the step it interrupts (skipped) before its record.
#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>

#include "keel/wire/vocabulary.hpp"
#include "origin/short_number.hpp"
#include "probe_impl.hpp"

namespace keel::probe {

void Probe::Impl::take_snapshot_if_due(int64_t next) {
  if (!snapshots_.due(next)) return;
  // The ranks of a job keep the same snapshots, so that each has the one they rewind to: as
  // their agreement of this step said (it runs on every step of a job that agrees).
  if (skip_agreement_ ? agreed_.hold_snapshots : holds_snapshots()) return;
  try {
    std::vector<torch::Tensor> buffers;
    model_->buffers(buffers);
    snapshots_.take(next, TrainingState{layers_.params(), buffers, *optimizer_, scaler_});
    keep_forecaster_with_snapshot(next);
  } catch (const std::exception& e) {
    report_probe_error("taking the snapshot of step " + std::to_string(next), e.what(),
                       "no snapshot of that step; training goes on, and a rewind goes to an older one");
  }
}

bool Probe::Impl::holds_snapshots() const {
  // While the run may be diverging, or a rewind is pending, the snapshots from before are the
  // ones to keep: a new one would hold a state about to be left, and could push out the one
  // the rewind goes back to.
  return control_.rewind_requested() || (options_.rewind_on_divergence && divergence_.in_run());
}

void Probe::Impl::keep_forecaster_with_snapshot(int64_t step) {
  if (!options_.forecast) return;
  const std::vector<int64_t> kept = snapshots_.steps();
  const auto gone = std::find_if(forecaster_at_snapshot_.begin(), forecaster_at_snapshot_.end(), [&](const auto& f) {
    return f.first == step || std::find(kept.begin(), kept.end(), f.first) == kept.end();
  });
  // Assigned over a copy of the same run's shape: its vectors keep their room.
  if (gone != forecaster_at_snapshot_.end()) {
    *gone = {step, forecaster_};
  } else {
    forecaster_at_snapshot_.emplace_back(step, forecaster_);
  }
}

void Probe::Impl::restore_forecaster(int64_t step) {
  const auto at = std::find_if(forecaster_at_snapshot_.begin(), forecaster_at_snapshot_.end(),
                               [&](const auto& f) { return f.first == step; });
  // Without its copy (taking it failed), the forecaster starts over: it says nothing until it
  // has its baselines again, rather than read the abandoned span as the run's.
  try {
    if (at != forecaster_at_snapshot_.end()) {
      forecaster_ = at->second;
      return;
    }
  } catch (const std::exception& e) {
    report_probe_error("putting back the early warning's state", e.what(), "it starts over");
  }
  forecaster_ = Forecaster(forecaster_.rule());
}

std::optional<Probe::Impl::Rewound> Probe::Impl::rewind(int64_t from_step) {
  const RemoteControl::RewindRequest request = *control_.rewind_requested();
  control_.rewind_taken();
  const auto start = Clock::now();
  std::vector<torch::Tensor> buffers;
  try {
    model_->buffers(buffers);
    snapshots_.restore(request.to_step, TrainingState{layers_.params(), buffers, *optimizer_, scaler_});
  } catch (const std::exception& e) {
    report_probe_error("rewinding to step " + std::to_string(request.to_step), e.what(),
                       "not rewound: step " + std::to_string(from_step) + "'s update was skipped, and training goes on",
                       from_step);
    return std::nullopt;
  }
  // The weights are the snapshot's: the update pass's copy of them is of the state left.
  layers_.weights_written();
  divergence_.restart();
  restore_forecaster(request.to_step);
  const double pause_ms = micros(Clock::now() - start) / 1000.0;
  char pause[32];
  std::snprintf(pause, sizeof pause, "%.1f", pause_ms);
  const double lr_factor = cut_learning_rate(request);
  dump_rewound_state(request.to_step);
  add_event(wire::event_kind::kRewind, "",
            "rewound from step " + std::to_string(from_step) + " to step " + std::to_string(request.to_step) +
                " (" + request.why + "): weights, buffers, optimizer state" +
                (scaler_ && scaler_->enabled() ? " and loss scale" : "") + " put back in " + pause +
                " ms; the batches of steps " + std::to_string(request.to_step) + ".." + std::to_string(from_step) +
                " were consumed and are not replayed unless the trainer's on_rewind repositions its data" +
                (lr_factor != 1.0 ? "; learning rate x" + short_number(lr_factor) + " (rewind_lr_factor)" : ""),
            from_step);
  return Rewound{request.to_step, lr_factor};
}

void Probe::Impl::dump_rewound_state(int64_t to_step) {
  // Every rank rewinds together (join_agreed_rewind), so every rank is here to agree on it.
  if (options_.rewind_dump) take_dump(to_step, "rewind", std::nullopt);
}

double Probe::Impl::cut_learning_rate(const RemoteControl::RewindRequest& request) {
  // The first rewind past a divergence keeps the learning rate: the batches were the likelier
  // cause. Diverging again from the state before says the step size is too (OPT's logbook).
  if (request.policy_rewind < 2 || options_.rewind_lr_factor == 1.0) return 1.0;
  try {
    optimizer_->scale_learning_rates(options_.rewind_lr_factor);
    return options_.rewind_lr_factor;
  } catch (const std::exception& e) {
    report_probe_error("cutting the learning rate after the rewind", e.what(),
                       "rewound, with the learning rate as it was");
    return 1.0;
  }
}

void Probe::Impl::watch_divergence(const StepOutcome& outcome, const Reduction& r) {
  // The step a rewind interrupted is of the state left behind.
  if (!options_.rewind_on_divergence || !r.stats_ok || outcome.skip_reason == "rewind") return;
  const std::optional<Divergence> diverged =
      divergence_.observe(record_step_, r.loss, decision_.health().blown_up());
  if (!diverged) return;
  const std::string cures =
      "; what usually cures a run that keeps diverging: a lower learning rate or a longer warmup, QK-norm "
      "(attention logits growing), z-loss (the output logits drifting), or fp32 for the layer that overflows";
  const std::optional<int64_t> to = diverged->onset > 0 ? snapshots_.newest_at_or_before(diverged->onset - 1)
                                                        : std::nullopt;
  if (policy_rewinds_ >= options_.rewind_max) {
    // Said once: every later divergence of a run past its cap would say the same.
    if (std::exchange(told_rewinds_stopped_, true)) return;
    add_event(wire::event_kind::kRewindStopped, "",
              "diverged again (" + diverged->why + ") after " + std::to_string(policy_rewinds_) +
                  " rewinds (rewind_max): not rewinding, training goes on" + cures);
    return;
  }
  if (!to) {
    std::string kept;
    for (const int64_t s : snapshots_.steps()) kept += (kept.empty() ? "" : ", ") + std::to_string(s);
    add_event(wire::event_kind::kRewindStopped, "",
              "diverged (" + diverged->why + "), and no snapshot from before step " + std::to_string(diverged->onset) +
                  " is kept (kept: " + (kept.empty() ? "none yet" : kept) + "): not rewound" + cures);
    return;
  }
  if (control_.schedule_rewind(RemoteControl::RewindRequest{
          *to, -1,
          "the rewind policy, " + std::to_string(policy_rewinds_ + 1) + " of at most " +
              std::to_string(options_.rewind_max) + ": " + diverged->why,
          policy_rewinds_ + 1})) {
    ++policy_rewinds_;
  }
}

}  // namespace keel::probe
