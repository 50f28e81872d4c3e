// The optimizers whose steps keel rebuilds or fuses (AdamW, Adam, SGD), in the variants that
// change the arithmetic: decay, amsgrad, momentum with dampening, Nesterov. Shared by the tests
// of the update rules and of the fused step.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace keel::test {

using MakeOptimizer = std::function<std::unique_ptr<torch::optim::Optimizer>(std::vector<torch::Tensor>)>;

struct OptimizerCase {
  std::string name;
  MakeOptimizer make;
};

inline std::vector<OptimizerCase> optimizer_cases() {
  using namespace torch::optim;
  return {
      {"AdamW", [](auto p) { return std::make_unique<AdamW>(p, AdamWOptions(1e-2).weight_decay(0.1)); }},
      {"AdamW amsgrad", [](auto p) { return std::make_unique<AdamW>(p, AdamWOptions(1e-2).weight_decay(0.1).amsgrad(true)); }},
      {"Adam", [](auto p) { return std::make_unique<Adam>(p, AdamOptions(1e-2).weight_decay(0.1)); }},
      {"SGD", [](auto p) { return std::make_unique<SGD>(p, SGDOptions(0.1).weight_decay(0.01)); }},
      // Dampening applies from the second step on: a buffer made wrongly on the first shows.
      {"SGD momentum", [](auto p) { return std::make_unique<SGD>(p, SGDOptions(0.1).momentum(0.9).dampening(0.5).weight_decay(0.01)); }},
      {"SGD nesterov", [](auto p) { return std::make_unique<SGD>(p, SGDOptions(0.1).momentum(0.9).nesterov(true).weight_decay(0.01)); }},
  };
}

}  // namespace keel::test
