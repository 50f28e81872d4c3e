#include "update_rules.hpp"

#include <cmath>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "keel/probe/torch_compat.hpp"

namespace keel::probe {
namespace {

using cuda::UpdateCoefficients;
using cuda::UpdateRule;

// ATen multiplies a float tensor by a double scalar in float: the decay W was multiplied by.
double decay_as_applied(double lr, double weight_decay) {
  if (weight_decay == 0) return 1.0;
  const double decay = static_cast<double>(static_cast<float>(1.0 - lr * weight_decay));
  if (!(decay > 0)) throw std::runtime_error("keel: lr * weight_decay >= 1 leaves no way to rebuild the update");
  return decay;
}

template <class ParamState>
const ParamState* state_of(torch::optim::Optimizer& optimizer, const torch::Tensor& param) {
  auto& state = optimizer.state();
  const auto found = state.find(compat::optimizer_state_key(param));
  return found == state.end() ? nullptr : static_cast<const ParamState*>(found->second.get());
}

// Adam and AdamW: u = lr / bc1 * m / (sqrt(v) / sqrt(bc2) + eps), as their step computes it.
template <class Options, class ParamState>
bool adam_rule(torch::optim::Optimizer& optimizer, torch::optim::OptimizerParamGroup& group, const torch::Tensor& p,
               bool decoupled_decay, LayerUpdateRule& rule) {
  const auto* options = dynamic_cast<const Options*>(&group.options());
  if (options == nullptr) return false;
  // Not stepped this time (no gradient: libtorch's step passes it by, as the fused one does)
  // or never: zero update. Its state is that of the last step it took part in.
  if (!p.grad().defined()) return true;
  const auto* state = state_of<ParamState>(optimizer, p);
  if (state == nullptr || state->step() == 0) return true;
  const double beta1 = std::get<0>(options->betas()), beta2 = std::get<1>(options->betas());
  const double bc1 = 1 - std::pow(beta1, static_cast<double>(state->step()));
  const double bc2 = 1 - std::pow(beta2, static_cast<double>(state->step()));
  UpdateCoefficients& c = rule.coefficients;
  c.rule = UpdateRule::kAdam;
  c.step_size = static_cast<float>(options->lr() / bc1);
  c.sqrt_bc2 = static_cast<float>(std::sqrt(bc2));
  c.eps = static_cast<float>(options->eps());
  c.decay = decoupled_decay ? decay_as_applied(options->lr(), options->weight_decay()) : 1.0;
  rule.first = state->exp_avg();
  rule.second = options->amsgrad() ? state->max_exp_avg_sq() : state->exp_avg_sq();
  return true;
}

// SGD: W_new = W_old - lr * d_p, with d_p = g + wd * W_old, then the momentum buffer (which
// holds the decay term) or Nesterov's g + wd * W_old + momentum * buf.
bool sgd_rule(torch::optim::Optimizer& optimizer, torch::optim::OptimizerParamGroup& group, const torch::Tensor& p,
              LayerUpdateRule& rule) {
  const auto* options = dynamic_cast<const torch::optim::SGDOptions*>(&group.options());
  if (options == nullptr) return false;
  if (!p.grad().defined()) return true;   // not stepped
  UpdateCoefficients& c = rule.coefficients;
  c.rule = UpdateRule::kLinear;
  c.lr = static_cast<float>(options->lr());
  rule.first = p.grad();
  if (options->momentum() == 0) {
    c.g_coef = 1;
    c.decay = decay_as_applied(options->lr(), options->weight_decay());
    return true;
  }
  const auto* state = state_of<torch::optim::SGDParamState>(optimizer, p);
  if (state == nullptr) throw std::runtime_error("keel: SGD with momentum has no buffer after its step");
  rule.second = state->momentum_buffer();
  if (options->nesterov()) {
    c.g_coef = 1;
    c.buf_coef = static_cast<float>(options->momentum());
    c.decay = decay_as_applied(options->lr(), options->weight_decay());
  } else {
    c.buf_coef = 1;   // the buffer already carries the weight decay
  }
  return true;
}

}  // namespace

bool has_update_rules(torch::optim::Optimizer& optimizer) {
  return dynamic_cast<torch::optim::AdamW*>(&optimizer) != nullptr ||
         dynamic_cast<torch::optim::Adam*>(&optimizer) != nullptr ||
         dynamic_cast<torch::optim::SGD*>(&optimizer) != nullptr;
}

bool steps_a_tensor_twice(torch::optim::Optimizer& optimizer) {
  std::unordered_set<const void*> seen;
  for (auto& group : optimizer.param_groups()) {
    for (const auto& p : group.params()) {
      if (!seen.insert(p.unsafeGetTensorImpl()).second) return true;
    }
  }
  return false;
}

LayerIndex::LayerIndex(const std::vector<torch::Tensor>& params) : layers(params.size()) {
  for (size_t i = 0; i < params.size(); ++i) layer_of[params[i].unsafeGetTensorImpl()] = i;
}

void read_update_rules(torch::optim::Optimizer& optimizer, const LayerIndex& layers, std::vector<LayerUpdateRule>& rules) {
  rules.assign(layers.layers, LayerUpdateRule{});
  std::vector<bool> read(layers.layers, false);
  const auto& layer_of = layers.layer_of;
  const bool adamw = dynamic_cast<torch::optim::AdamW*>(&optimizer) != nullptr;
  const bool adam = dynamic_cast<torch::optim::Adam*>(&optimizer) != nullptr;
  const bool sgd = dynamic_cast<torch::optim::SGD*>(&optimizer) != nullptr;
  if (!adamw && !adam && !sgd) throw std::runtime_error("keel: this optimizer's updates cannot be rebuilt");
  for (auto& group : optimizer.param_groups()) {
    for (const auto& p : group.params()) {
      const auto found = layer_of.find(p.unsafeGetTensorImpl());
      if (found == layer_of.end()) continue;
      if (!read[found->second]) {
        read[found->second] = true;
      } else {
        throw std::runtime_error("keel: the optimizer holds one tensor twice and steps it twice; its update cannot be rebuilt");
      }
      LayerUpdateRule& rule = rules[found->second];
      bool known = false;
      if (adamw) known = adam_rule<torch::optim::AdamWOptions, torch::optim::AdamWParamState>(optimizer, group, p, true, rule);
      if (adam) known = adam_rule<torch::optim::AdamOptions, torch::optim::AdamParamState>(optimizer, group, p, false, rule);
      if (sgd) known = sgd_rule(optimizer, group, p, rule);
      if (!known) throw std::runtime_error("keel: a parameter group's options do not match its optimizer");
    }
  }
}

std::vector<int> group_of_layers(torch::optim::Optimizer& optimizer, const LayerIndex& layers) {
  std::vector<int> group_of(layers.layers, -1);
  int g = 0;
  for (auto& group : optimizer.param_groups()) {
    for (const auto& p : group.params()) {
      const auto found = layers.layer_of.find(p.unsafeGetTensorImpl());
      if (found != layers.layer_of.end()) group_of[found->second] = g;
    }
    ++g;
  }
  return group_of;
}

bool plain_sgd_lrs(torch::optim::Optimizer& optimizer, std::vector<double>& lrs) {
  lrs.clear();
  if (dynamic_cast<torch::optim::SGD*>(&optimizer) == nullptr) return false;
  for (auto& group : optimizer.param_groups()) {
    const auto* options = dynamic_cast<const torch::optim::SGDOptions*>(&group.options());
    if (options == nullptr || options->momentum() != 0 || options->weight_decay() != 0) return false;
    lrs.push_back(options->lr());
  }
  return true;
}

}  // namespace keel::probe
