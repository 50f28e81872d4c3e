// The probe's early warning and its on_event callback (ProbeOptions::forecast, on_event).
#include <exception>

#include "keel/wire/vocabulary.hpp"
#include "origin/short_number.hpp"
#include "probe_impl.hpp"

namespace keel::probe {

void Probe::Impl::watch_forecast(const wire::StepRecord& record) {
  if (!options_.forecast) return;
  try {
    forecaster_.observe(record, description_, forecasts_);
    for (Forecast& f : forecasts_) {
      add_event(wire::event_kind::kWarning, f.layer, f.sentence + cut_learning_rate_on_warning(record.step));
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
