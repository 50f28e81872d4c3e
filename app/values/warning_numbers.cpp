#include "values/warning_numbers.hpp"

#include <cmath>
#include <cstdio>

namespace keel::app {
namespace {

// log_z is a log already: its trend is in nats and its distance from the baseline a difference.
bool additive(const wire::Warning& warning) { return warning.signal == "log_z"; }
// The loss scale's trend is how much it falls (PROTOCOL §3.4), the others' how much they rise.
bool falls(const wire::Warning& warning) { return warning.signal == "loss_scale"; }

std::string number(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", value);
  return text;
}

}  // namespace

std::string warning_level_text(const wire::Warning& warning) {
  std::string out = number(warning.value);
  if (!std::isfinite(warning.baseline) || warning.baseline == 0 || !std::isfinite(warning.value)) return out;
  if (additive(warning)) {
    const double above = warning.value - warning.baseline;
    return out + ", " + number(std::fabs(above)) + (above >= 0 ? " above" : " below") + " its baseline " +
           number(warning.baseline);
  }
  return out + ", " + number(warning.value / warning.baseline) + "x its baseline " + number(warning.baseline);
}

std::string warning_trend_text(const wire::Warning& warning) {
  if (!std::isfinite(warning.per_step)) return "changing by " + number(warning.per_step) + " a step";
  if (additive(warning)) {
    return std::string(warning.per_step >= 0 ? "rising " : "falling ") + number(std::fabs(warning.per_step)) + " a step";
  }
  // per_step is a change of the value's natural log a step (the loss scale's: how much it
  // falls), so exp(change) - 1 is the change a step.
  const double log_change = falls(warning) ? -warning.per_step : warning.per_step;
  const double percent = std::fabs(std::expm1(log_change)) * 100.0;
  return std::string(log_change >= 0 ? "rising " : "falling ") + number(percent) + "% a step";
}

std::string warning_lead_text(const wire::Warning& warning) {
  if (warning.lead_steps < 0) return "no estimate of when";
  return "may diverge in ~" + std::to_string(warning.lead_steps) + " steps";
}

std::string warning_numbers_text(const wire::Warning& warning) {
  return warning.signal + " " + warning_level_text(warning) + ", " + warning_trend_text(warning) + "; " +
         warning_lead_text(warning);
}

}  // namespace keel::app
