// The model's parameters as the probe's layers: one layer per tensor.
//
// What it is for: a model lists a tensor once per name it has (TrainedModel::named_parameters:
// a submodule registered under two names, weights tied by registering one tensor twice).
// Measured per name, a shared gradient was unscaled twice, and two spans wrote the
// same memory in one parallel region. Here it is one layer, under the first name, and the
// other names are its aliases (LayerInfo::aliases). Distinct tensors that share storage
// (tied with set_data) have gradients of their own and stay layers of their own.
// A tensor the optimizer steps that the model does not have (a learned temperature kept
// outside the module) is a layer too, after the model's, named after its place in the
// optimizer ("optimizer.param_groups.1.params.0"): unwatched, it was stepped with its
// gradient still scaled, and its NaNs never skipped a step.
// Threads: the training thread. Never: touches tensor values.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "keel/probe/optimizer_adapter.hpp"
#include "keel/probe/trained_model.hpp"

namespace keel::probe {

using NamedParams = NamedTensors;

struct ModelParameters {
  NamedParams params;                              // one per tensor, in named_parameters() order
  std::vector<std::vector<std::string>> aliases;   // per entry of params: its other names
};

// The model's parameters now, one entry per tensor, then the optimizer's that the model does
// not have (none without an optimizer).
ModelParameters parameters_of(TrainedModel& model, const OptimizerAdapter* optimizer);

}  // namespace keel::probe
