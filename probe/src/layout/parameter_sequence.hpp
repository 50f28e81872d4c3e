// parameter_sequence: which tensors a model and its optimizer hold, in order, with no names.
//
// What it is for: the probe follows the model's parameters at every step (ParameterLayout).
// Names are built only when something changed; the tensors' identities in the same order
// (TrainedModel::identities: named_parameters()' order, a tensor once per name it has) say
// whether anything did. Then each optimizer group's parameters, the groups told apart.
// Threads: the training thread. Never: touches tensor values.
#pragma once

#include <vector>

#include "keel/probe/optimizer_adapter.hpp"
#include "keel/probe/trained_model.hpp"

namespace keel::probe {

// The sequence into `out` (cleared; its capacity reused). With `float_buffers`, the same walk
// of the model also gives the floating-point buffers' identities in named_buffers() order:
// the buffers are followed at every step too (ModelBuffers), and one walk of a module tree
// costs what two do, cold from the forward and backward passes.
void parameter_sequence(TrainedModel& model, const OptimizerAdapter* optimizer, std::vector<const void*>& out,
                        std::vector<const void*>* float_buffers = nullptr);
inline std::vector<const void*> parameter_sequence(TrainedModel& model, const OptimizerAdapter* optimizer) {
  std::vector<const void*> out;
  parameter_sequence(model, optimizer, out);
  return out;
}

}  // namespace keel::probe
