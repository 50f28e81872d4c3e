// parameter_sequence: which tensors a model and its optimizer hold, in order, with no names.
//
// What it is for: the probe follows the model's parameters at every step (ParameterLayout).
// named_parameters() builds every parameter's dotted name and an index of them each time:
// 54 us of keel-demo's step for 42 names, the largest part of the probe's own time on the
// training thread. The tensors' identities in the same order say whether anything changed;
// the names are built only when something did. The order is named_parameters(recurse)'s
// (each module's own parameters, modules in pre-order, a tensor once per name it has), then
// each optimizer group's parameters, the groups told apart.
// Threads: the training thread. Never: touches tensor values.
#pragma once

#include <vector>

#include <torch/torch.h>

namespace keel::probe {

// The sequence into `out` (cleared; its capacity reused). With `float_buffers`, the same walk
// of the modules also gives the floating-point buffers' identities in named_buffers() order
// (a tensor once per name): the buffers are followed at every step too (ModelBuffers), and
// one walk of a module tree costs what two do, cold from the forward and backward passes.
void parameter_sequence(const torch::nn::Module& model, torch::optim::Optimizer* optimizer,
                        std::vector<const void*>& out, std::vector<const void*>* float_buffers = nullptr);
inline std::vector<const void*> parameter_sequence(const torch::nn::Module& model, torch::optim::Optimizer* optimizer) {
  std::vector<const void*> out;
  parameter_sequence(model, optimizer, out);
  return out;
}

}  // namespace keel::probe
