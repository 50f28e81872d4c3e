#include "naive_checks.hpp"

#include <algorithm>
#include <cstdio>

namespace keel::bench {

void naive_step(keel::demo::Trainer& trainer, std::vector<torch::Tensor>& copies) {
  torch::NoGradGuard no_grad;
  auto params = trainer.model()->parameters();
  copies.resize(params.size());
  bool bad = false;
  double norm_sum = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const auto& g = params[i].grad();
    bad = bad || torch::isnan(g).any().item<bool>() || torch::isinf(g).any().item<bool>();
    norm_sum += g.norm().item<double>();
    copies[i] = params[i].detach().clone();
  }
  if (!bad) trainer.optimizer().step();
  double ratio_sum = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    ratio_sum += (params[i] - copies[i]).norm().item<double>() / copies[i].norm().item<double>();
  }
  if (norm_sum < 0 || ratio_sum < 0) std::puts("impossible");   // keeps the work observable
}

}  // namespace keel::bench
