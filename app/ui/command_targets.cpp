#include "ui/command_targets.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "model/run_model.hpp"

namespace keel::app::ui {

std::optional<CommandTarget> target_for_rank(const std::vector<EndpointState>& links, int32_t rank) {
  if (links.empty()) return std::nullopt;
  if (links.size() == 1) return CommandTarget{links.front().endpoint, -1};
  const EndpointState* best = nullptr;
  for (const EndpointState& link : links) {
    if (link.rank != rank) continue;
    if (best == nullptr || (link.state == LinkState::kLive && best->state != LinkState::kLive)) best = &link;
  }
  if (best == nullptr) {
    const auto live = std::find_if(links.begin(), links.end(),
                                   [](const EndpointState& link) { return link.state == LinkState::kLive; });
    best = live != links.end() ? &*live : &links.front();
  }
  return CommandTarget{best->endpoint, rank};
}

std::vector<CommandTarget> every_rank(const std::vector<EndpointState>& links) {
  std::map<int32_t, const EndpointState*> by_rank;
  for (const EndpointState& link : links) {
    if (link.rank < 0) continue;
    const EndpointState*& chosen = by_rank[link.rank];
    if (chosen == nullptr || (link.state == LinkState::kLive && chosen->state != LinkState::kLive)) chosen = &link;
  }
  std::vector<CommandTarget> targets;
  for (const auto& [rank, link] : by_rank) targets.push_back({link->endpoint, rank});
  return targets;
}

int64_t synchronized_skip_step(const Model& model, double lead_secs) {
  int64_t newest = -1;
  double lead = double(kMinSkipLeadSteps);
  for (int32_t rank : model.ranks()) {
    const RunModel* run = model.current_run(rank);
    if (run == nullptr || !run->has_steps()) continue;
    newest = std::max(newest, run->last_step());
    lead = std::max(lead, std::ceil(run->steps_per_second() * lead_secs));
  }
  return newest + 1 + int64_t(lead);
}

}  // namespace keel::app::ui
