#include "cli/layer_names.hpp"

namespace keel::app {

void LayerNames::learn(const keel::wire::RunDescription& description) {
  std::vector<std::string>& names = names_[description.rank];
  names.clear();
  names.reserve(description.layers.size());
  for (const keel::wire::LayerInfo& layer : description.layers) names.push_back(layer.name);
}

std::string LayerNames::name(int32_t rank, uint32_t index) const {
  const auto found = names_.find(rank);
  if (found != names_.end() && index < found->second.size()) return found->second[index];
  return "layer" + std::to_string(index);
}

}  // namespace keel::app
