// Building the run description (layer names, shapes, dtypes, versions) at attach time.
// Threads: the training thread, once per attach. Never: touches tensor values.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "keel/probe/probe.hpp"
#include "keel/wire/messages.hpp"

namespace keel::probe {

std::string dtype_name(torch::ScalarType type);
std::string default_run_id();
// The names of the policies (command_server.hpp) that `options` has on, for the description.
std::vector<std::string> policies_on(const ProbeOptions& options);
wire::RunDescription describe_run(const std::vector<std::pair<std::string, torch::Tensor>>& params,
                                  const ProbeOptions& options);

}  // namespace keel::probe
