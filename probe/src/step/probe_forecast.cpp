// The probe's early warning, what it does on a warning (warning_lr_factor, the snapshot it
// keeps) and its on_event callback (ProbeOptions::forecast, on_event).
#include <algorithm>
#include <exception>
#include <optional>
#include <string>

#include "keel/wire/vocabulary.hpp"
#include "origin/short_number.hpp"
#include "probe_impl.hpp"

namespace keel::probe {

void Probe::Impl::watch_forecast(const wire::StepRecord& record) {
  if (!options_.forecast) return;
  try {
    forecaster_.observe(record, description_, forecasts_);
    if (forecasts_.empty()) return;
    const std::string acted = cut_learning_rate_on_warning(record.step) + hold_snapshot_on_warning(record.step);
    for (Forecast& f : forecasts_) {
      add_event(wire::event_kind::kWarning, f.layer, f.sentence + acted);
      events_.last().warning = std::move(f.warning);
    }
  } catch (const std::exception& e) {
    report_probe_error("forecasting", e.what(), "no warning this step");
  }
}

std::string Probe::Impl::cut_learning_rate_on_warning(int64_t step) {
  const double factor = options_.warning_lr_factor;
  if (factor == 1.0 || step < warning_cut_quiet_until_) return "";
  warning_cut_quiet_until_ = step + forecaster_.rule().quiet_steps;
  try {
    optimizer_->scale_learning_rates(factor);
  } catch (const std::exception& e) {
    report_probe_error("cutting the learning rate on a warning", e.what(), "the learning rate is as it was");
    return "";
  }
  return "; learning rate x" + short_number(factor) + " (warning_lr_factor)";
}

namespace {
// The end of a warning's sentence about the snapshot it keeps: what it is for, and the command.
std::string for_a_rewind_to(int64_t step) {
  return " for a rewind to before the trend (keel-cli send rewind --to-step " + std::to_string(step) + ")";
}
}  // namespace

std::string Probe::Impl::hold_snapshot_on_warning(int64_t step) {
  // One trend warns again and again: the hold stays on the snapshot from before its first
  // warning, and moves only for a warning after quiet_steps without one (a new trend).
  const bool new_trend = last_warning_step_ < 0 || step - last_warning_step_ > forecaster_.rule().quiet_steps;
  last_warning_step_ = step;
  if (!snapshots_.enabled()) return "";
  if (skip_agreement_) {
    // The ranks of a job must keep the same snapshots to rewind to the same step, and each
    // warns on its own: the hold is asked of them all and taken by every rank in the next
    // step's agreement (agree_with_ranks), the earliest asked winning.
    if (new_trend || !snapshots_.held()) hold_requested_ = hold_requested_ < 0 ? step : std::min(hold_requested_, step);
    const std::optional<int64_t> before = snapshots_.held() && !new_trend ? snapshots_.held()
                                                                          : snapshots_.newest_at_or_before(step);
    if (!before) return "";
    return "; every rank keeps the snapshot of step " + std::to_string(*before) +
           " (or an older one another rank asks for)" + for_a_rewind_to(*before);
  }
  // A job of several ranks that do not agree cannot keep the same snapshots: none is held.
  if (options_.world_size > 1) return "";
  const std::optional<int64_t> held = new_trend || !snapshots_.held() ? snapshots_.hold(step) : snapshots_.held();
  if (!held) return "";
  return "; the snapshot of step " + std::to_string(*held) + " is kept" + for_a_rewind_to(*held);
}

void Probe::Impl::tell_events() {
  if (!options_.on_event) {
    events_.tell_untold([](const wire::Event&) {});
    return;
  }
  // The callback's failure is the trainer's code failing inside a step: counted and told, and
  // the events after it are still told.
  std::vector<std::string> failures;
  events_.tell_untold([&](const wire::Event& e) {
    try {
      options_.on_event(e);
    } catch (const std::exception& error) {
      failures.push_back(error.what());
    } catch (...) {
      failures.push_back("an exception that is not a std::exception");
    }
  });
  for (const std::string& failure : failures) {
    report_probe_error("in ProbeOptions::on_event", failure, "the event was raised; training goes on");
  }
  // Those failures are told too, now; one of them failing in turn is not told again (no loop).
  events_.tell_untold([&](const wire::Event& e) {
    try {
      options_.on_event(e);
    } catch (...) {
    }
  });
}

}  // namespace keel::probe
