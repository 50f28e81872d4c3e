// Test fixtures shared by the probe's policy and command tests: a two-layer net whose backward
// order (fc2 before fc1) differs from its model order, gradient poisoning, and bitwise
// comparison of parameters and optimizer state.
#pragma once

#include <torch/torch.h>

#include "keel/probe/torch_compat.hpp"

#include <cstring>
#include <limits>
#include <vector>

namespace keel::test {

struct TwoLayerImpl : torch::nn::Module {
  TwoLayerImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(5, 8));
    fc2 = register_module("fc2", torch::nn::Linear(8, 3));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc2->forward(torch::tanh(fc1->forward(x))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(TwoLayer);

// Gradients of a random batch of four, in `dtype` (the net's own), for the optimizer's step.
inline void backward(TwoLayer& net, torch::optim::Optimizer& opt, torch::Dtype dtype = torch::kFloat) {
  opt.zero_grad();
  net->forward(torch::randn({4, 5}).to(dtype)).pow(2).mean().backward();
}

// Writes a NaN into the first element of the parameter's gradient.
inline void poison(const torch::Tensor& param) {
  torch::NoGradGuard no_grad;
  param.grad().view({-1})[0] = std::numeric_limits<float>::quiet_NaN();
}

// Bitwise equality: NaN == NaN, -0 != +0.
inline bool bit_identical(const torch::Tensor& a, const torch::Tensor& b) {
  if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()) return false;
  auto ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0;
}

inline bool all_identical(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!bit_identical(a[i], b[i])) return false;
  }
  return true;
}

// Parameters and AdamW moments and step counts, cloned, in parameter order.
inline std::vector<torch::Tensor> params_and_adamw_state(torch::nn::Module& net, torch::optim::AdamW& opt) {
  std::vector<torch::Tensor> out;
  for (auto& p : net.parameters()) {
    out.push_back(p.detach().clone());
    const auto key = keel::probe::compat::optimizer_state_key(p);
    if (opt.state().count(key) == 0) continue;   // before the first applied update
    auto& s = static_cast<torch::optim::AdamWParamState&>(*opt.state().at(key));
    out.push_back(s.exp_avg().clone());
    out.push_back(s.exp_avg_sq().clone());
    out.push_back(torch::tensor(s.step()));
  }
  return out;
}

}  // namespace keel::test
