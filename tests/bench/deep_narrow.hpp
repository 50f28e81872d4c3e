// The deep narrow model of keel-bench-probe's per-tensor measurements (issue 30): N/2
// Linear(16, 16) in a row, a ReLU between them, so N small tensors.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

namespace keel::bench {

struct DeepNarrow : torch::nn::Module {
  explicit DeepNarrow(int64_t layers) {
    for (int64_t i = 0; i < layers; ++i) {
      linears.push_back(register_module("l" + std::to_string(i), torch::nn::Linear(16, 16)));
    }
  }
  torch::Tensor forward(torch::Tensor x) {
    for (size_t i = 0; i < linears.size(); ++i) {
      x = linears[i]->forward(x);
      if (i + 1 < linears.size()) x = torch::relu(x);
    }
    return x;
  }
  std::vector<torch::nn::Linear> linears;
};

}  // namespace keel::bench
