// keel app command targets: which endpoint a control's command goes to when the dashboard
// watches several ranks (one probe, one endpoint each), and the step a skip of every rank names.
//
// What it is for: a command is for one probe, and a probe refuses one meant for another rank,
// so a control sends to the endpoint whose telemetry carries the rank the panes show. A skip,
// though, must take effect on the same step on every rank of a data-parallel job, or the
// replicas diverge (DESIGN §5): it goes to every rank with one `at_step` far enough ahead that
// each probe still has that step to come when the command arrives.
// Threads: the UI thread. Never: touches a socket or ImGui.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/model.hpp"
#include "values/endpoint_state.hpp"

namespace keel::app::ui {

struct CommandTarget {
  std::string endpoint;  // the telemetry endpoint; commands go to its command socket
  int32_t rank = -1;     // the rank to name in the command (-1: any, with a single endpoint)
};

// The endpoint of `rank`: the link whose telemetry carries that rank, a live one first; else
// the first live link, else the first. nullopt without links. With a single link the command
// names no rank (-1), as for a probe whose rank the dashboard has not heard yet.
std::optional<CommandTarget> target_for_rank(const std::vector<EndpointState>& links, int32_t rank);

// One target per distinct rank heard from (ascending rank), a live link first for each.
std::vector<CommandTarget> every_rank(const std::vector<EndpointState>& links);

// The step a skip of every rank names: `lead_secs` of training past the newest step any rank
// has reported (at that rank's pace), and at least kMinSkipLeadSteps past it. The command's
// round trip is a step plus a few milliseconds (BENCHMARKS.md) and the dashboard sees a step
// some tens of milliseconds after it was trained, so a second leaves every rank the step still
// to come unless the dashboard is far behind (a loaded machine), and then the probe refuses.
inline constexpr int64_t kMinSkipLeadSteps = 3;
int64_t synchronized_skip_step(const Model& model, double lead_secs = 1.0);

}  // namespace keel::app::ui
