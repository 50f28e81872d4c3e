// Building the run description (layer names, shapes, dtypes, versions) at attach time, and
// its layers again when the model changes.
// Threads: the training thread. Never: touches tensor values.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "keel/probe/probe_options.hpp"
#include "keel/wire/messages.hpp"
#include "model_parameters.hpp"

namespace keel::probe {

std::string dtype_name(torch::ScalarType type);
std::string default_run_id();
// The names of the policies (command_server.hpp) that `options` has on, for the description.
std::vector<std::string> policies_on(const ProbeOptions& options);
wire::RunDescription describe_run(const ModelParameters& parameters, const ProbeOptions& options);
// The layers, modules and device of `description` from `params` (at attach, and again when the
// model's parameters change: the same run, re-described). Modules (plan_module_ranges) only
// for a model of more than `layer_detail_above` layers (ProbeOptions; 0: none).
void describe_layers(const ModelParameters& parameters, int64_t layer_detail_above, wire::RunDescription& description);

}  // namespace keel::probe
