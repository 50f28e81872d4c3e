// LayerNames: which name a step record's layer index stands for, per rank.
//
// What it is for: step records carry per-layer values by index (model order) to stay small;
// the names travel in the run description. Clients feed every description they receive to
// learn() and ask name() when printing a step.
// Threads: a plain value owned by one thread.
// Never: throws for an unknown rank or index (it falls back to "layer<i>").
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "keel/wire/messages.hpp"

namespace keel::app {

class LayerNames {
 public:
  // Replaces what was known for description.rank: a re-sent description may follow a restart
  // of the trainer with another model.
  void learn(const keel::wire::RunDescription& description);

  // Name of layer `index` of `rank`, or "layer<index>" when no description of that rank has
  // arrived or it has fewer layers.
  std::string name(int32_t rank, uint32_t index) const;

  bool knows(int32_t rank) const { return names_.count(rank) != 0; }

 private:
  std::map<int32_t, std::vector<std::string>> names_;
};

}  // namespace keel::app
