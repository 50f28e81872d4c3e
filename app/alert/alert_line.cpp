#include "alert/alert_line.hpp"

#include "alert/alert_json.hpp"
#include "text/table_format.hpp"

namespace keel::app {

std::string alert_line(const Alert& alert) {
  std::string out = "alert " + terminal_safe(alert.kind) + " step " + std::to_string(alert.step) + " rank " +
                    std::to_string(alert.rank);
  if (!alert.run.empty()) out += " run " + terminal_safe(alert.run);
  if (!alert.model.empty()) out += " model " + terminal_safe(alert.model);
  if (alert.event && !alert.event->layer.empty()) out += " layer " + terminal_safe(alert.event->layer);
  out += ": " + terminal_safe(alert_detail(alert));
  if (alert.suppressed > 0) out += " (" + std::to_string(alert.suppressed) + " more held back since the last)";
  return out;
}

}  // namespace keel::app
