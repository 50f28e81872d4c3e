// LayerNames: which name a step record's layer index stands for, per run.
//
// What it is for: step records carry per-layer values by index (model order) to stay small;
// the names travel in the run description. Clients feed every description they receive to
// learn() and ask name() when printing a step. Names are kept per run identity (run_id, model,
// rank): two probes of one process are both rank 0, and a record names its run (PROTOCOL §5).
// A record that does not (a probe older than the `run` key) takes the names of the last
// description of its rank. The run's buffers (StepRecord::buffer_absmax) and modules (a wide
// model's module rollups, StepRecord::module_values) are named alike.
// Threads: a plain value owned by one thread.
// Never: throws for an unknown run, rank or index (it falls back to "layer<i>").
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "keel/wire/messages.hpp"
#include "keel/wire/run_key.hpp"

namespace keel::app {

class LayerNames {
 public:
  // Replaces what was known for the description's run, and for its rank: a re-sent
  // description may follow a restart of the trainer with another model.
  void learn(const keel::wire::RunDescription& description);

  // Name of layer `index` of the step's run, or "layer<index>" when no description of that
  // run has arrived or it has fewer layers.
  std::string name(const keel::wire::StepRecord& step, uint32_t index) const;
  // Name of buffer `index` of the step's run, or "buffer<index>", alike.
  std::string buffer_name(const keel::wire::StepRecord& step, uint32_t index) const;
  // Name of module `index` of the step's run (RunDescription::modules: a layer-name prefix,
  // "" for the model's own parameters), or "module<index>", alike.
  std::string module_name(const keel::wire::StepRecord& step, uint32_t index) const;

 private:
  struct Names {
    std::vector<std::string> layers, buffers, modules;
  };
  const Names* names_of(const keel::wire::StepRecord& step) const;
  std::map<wire::RunKey, Names> by_run_;
  std::map<int32_t, Names> by_rank_;   // of the rank's last description
};

}  // namespace keel::app
