#include "cli/layer_names.hpp"

#include <utility>

namespace keel::app {

void LayerNames::learn(const keel::wire::RunDescription& description) {
  std::vector<std::string> names;
  names.reserve(description.layers.size());
  for (const keel::wire::LayerInfo& layer : description.layers) names.push_back(layer.name);
  by_rank_[description.rank] = names;
  by_run_[wire::run_key_of(description)] = std::move(names);
}

std::string LayerNames::name(const keel::wire::StepRecord& step, uint32_t index) const {
  const std::vector<std::string>* names = nullptr;
  if (step.run.empty()) {
    const auto found = by_rank_.find(step.rank);
    if (found != by_rank_.end()) names = &found->second;
  } else {
    const auto found = by_run_.find(wire::run_key_of(step));
    if (found != by_run_.end()) names = &found->second;
  }
  if (names != nullptr && index < names->size()) return (*names)[index];
  return "layer" + std::to_string(index);
}

}  // namespace keel::app
