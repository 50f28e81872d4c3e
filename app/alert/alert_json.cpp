#include "alert/alert_json.hpp"

#include <cmath>

#include "text/json_format.hpp"
#include "text/layer_names.hpp"
#include "values/warning_numbers.hpp"

namespace keel::app {

using Json = nlohmann::ordered_json;

std::string alert_detail(const Alert& alert) {
  if (alert.event) {
    // The forecaster's sentence carries its numbers; a warning without one still says them.
    if (alert.event->detail.empty() && alert.event->warning) return warning_numbers_text(*alert.event->warning);
    return alert.event->detail;
  }
  std::string of_run = alert.run.empty() ? "" : " of run " + alert.run;
  if (!alert.model.empty()) of_run += " (model " + alert.model + ")";
  return "no step or event from rank " + std::to_string(alert.rank) + of_run + " for " +
         std::to_string(std::llround(alert.silent_secs)) + " s after step " + std::to_string(alert.step) +
         "; the trainer may have died, hung or ended";
}

Json alert_json(const Alert& alert) {
  Json out;
  if (alert.event) {
    out = to_json(wire::Message{*alert.event}, LayerNames{});
  } else {
    // The keys an event has, so a script reads every alert alike; "watcher": no probe raised it.
    out["type"] = "watcher";
    out["rank"] = alert.rank;
    out["run"] = alert.run;
    out["model"] = alert.model;
    out["step"] = alert.step;
    out["kind"] = alert.kind;
    out["layer"] = "";
    out["detail"] = alert_detail(alert);
    out["stamp_unix_ns"] = alert.stamp_unix_ns;
    out["silent_secs"] = json_number(alert.silent_secs);
  }
  out["suppressed"] = alert.suppressed;
  return out;
}

std::string alert_json_line(const Alert& alert) {
  return alert_json(alert).dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace keel::app
