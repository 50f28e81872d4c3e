// UpdateRules: how to rebuild, for each of the probe's layers, the update its optimizer just
// applied (cuda/update_math.hpp), read through its OptimizerAdapter after its step.
//
// What it is for: update_ratio without a copy of the weights. AdamW, Adam and SGD keep, after
// their step, everything their update was made of (moments, momentum buffer, the gradient,
// the group's hyperparameters). Other optimizers have no rule: the probe keeps a snapshot of
// the weights for them.
// Threads: the training thread, right after optimizer.step(). Never: changes the optimizer.
#pragma once

#include <unordered_map>
#include <vector>

#include <torch/torch.h>

#include "cuda/update_math.hpp"
#include "keel/probe/optimizer_adapter.hpp"

namespace keel::probe {

struct LayerUpdateRule {
  cuda::UpdateCoefficients coefficients;   // zero update (u = 0, decay 1) when not stepped
  torch::Tensor first, second;             // what the rule reads; undefined when it reads nothing
};

// Whether `optimizer` is one whose updates can be rebuilt (AdamW, Adam, SGD).
bool has_update_rules(const OptimizerAdapter& optimizer);
// Whether it holds some tensor more than once (built from a model that registers a submodule
// twice): libtorch steps such a tensor once per entry, which one rule does not rebuild.
bool steps_a_tensor_twice(const OptimizerAdapter& optimizer);

// Which layer each of the probe's parameters is (by TensorImpl): built once per list of
// layers, not per step.
struct LayerIndex {
  explicit LayerIndex(const std::vector<torch::Tensor>& params);
  std::unordered_map<const void*, size_t> layer_of;
  size_t layers = 0;
};

// rules[i] for layer i of `layers`, after optimizer.step(). A layer the optimizer did not step
// (no gradient, not in any group) gets the zero update. Throws std::runtime_error where the
// update cannot be rebuilt (an optimizer without rules; lr * weight_decay >= 1, which erases
// W_old; a tensor the optimizer steps twice).
void read_update_rules(const OptimizerAdapter& optimizer, const LayerIndex& layers, std::vector<LayerUpdateRule>& rules);

// Which of the optimizer's parameter groups steps each of `layers` (-1: none). Read once per
// list of layers and groups: the parameter sequence the probe compares every step marks a
// change of either.
std::vector<int> group_of_layers(const OptimizerAdapter& optimizer, const LayerIndex& layers);
// A plain SGD step (no momentum, no weight decay) moves W by -lr * g, so its update's norm is
// lr * |g|, which the gradient pass has already measured. When every group of `optimizer` is
// such a step now, `lrs` gets each group's lr and the answer is true.
bool plain_sgd_lrs(const OptimizerAdapter& optimizer, std::vector<double>& lrs);

}  // namespace keel::probe
