#include "text/layer_names.hpp"

#include <utility>

namespace keel::app {

void LayerNames::learn(const keel::wire::RunDescription& description) {
  Names names;
  names.layers.reserve(description.layers.size());
  for (const keel::wire::LayerInfo& layer : description.layers) names.layers.push_back(layer.name);
  names.buffers = description.buffers;
  names.modules.reserve(description.modules.size());
  for (const keel::wire::ModuleRange& module : description.modules) names.modules.push_back(module.name);
  by_rank_[description.rank] = names;
  by_run_[wire::run_key_of(description)] = std::move(names);
}

const LayerNames::Names* LayerNames::names_of(const keel::wire::StepRecord& step) const {
  if (step.run.empty()) {
    const auto found = by_rank_.find(step.rank);
    return found != by_rank_.end() ? &found->second : nullptr;
  }
  const auto found = by_run_.find(wire::run_key_of(step));
  return found != by_run_.end() ? &found->second : nullptr;
}

std::string LayerNames::name(const keel::wire::StepRecord& step, uint32_t index) const {
  const Names* names = names_of(step);
  if (names != nullptr && index < names->layers.size()) return names->layers[index];
  return "layer" + std::to_string(index);
}

std::string LayerNames::buffer_name(const keel::wire::StepRecord& step, uint32_t index) const {
  const Names* names = names_of(step);
  if (names != nullptr && index < names->buffers.size()) return names->buffers[index];
  return "buffer" + std::to_string(index);
}

std::string LayerNames::module_name(const keel::wire::StepRecord& step, uint32_t index) const {
  const Names* names = names_of(step);
  if (names != nullptr && index < names->modules.size()) return names->modules[index];
  return "module" + std::to_string(index);
}

}  // namespace keel::app
