#include "update_rules.hpp"

#include <cmath>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>


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

// Adam and AdamW: u = lr / bc1 * m / (sqrt(v) / sqrt(bc2) + eps), as their step computes it.
void adam_rule(const OptimizerAdapter& optimizer, const GroupHyperparameters& h, const torch::Tensor& p,
               bool decoupled_decay, LayerUpdateRule& rule) {
  // Not stepped this time (no gradient: the step passes it by, as the fused one does) or
  // never: zero update. Its state is that of the last step it took part in.
  if (!p.grad().defined()) return;
  const ParamStateView state = optimizer.state_of(p);
  if (!state.present || state.step == 0) return;
  const double bc1 = 1 - std::pow(h.beta1, static_cast<double>(state.step));
  const double bc2 = 1 - std::pow(h.beta2, static_cast<double>(state.step));
  UpdateCoefficients& c = rule.coefficients;
  c.rule = UpdateRule::kAdam;
  c.step_size = static_cast<float>(h.lr / bc1);
  c.sqrt_bc2 = static_cast<float>(std::sqrt(bc2));
  c.eps = static_cast<float>(h.eps);
  c.decay = decoupled_decay ? decay_as_applied(h.lr, h.weight_decay) : 1.0;
  rule.first = state.exp_avg;
  rule.second = h.amsgrad ? state.max_exp_avg_sq : state.exp_avg_sq;
}

// SGD: W_new = W_old - lr * d_p, with d_p = g + wd * W_old, then the momentum buffer (which
// holds the decay term) or Nesterov's g + wd * W_old + momentum * buf.
void sgd_rule(const OptimizerAdapter& optimizer, const GroupHyperparameters& h, const torch::Tensor& p,
              LayerUpdateRule& rule) {
  if (!p.grad().defined()) return;   // not stepped
  UpdateCoefficients& c = rule.coefficients;
  c.rule = UpdateRule::kLinear;
  c.lr = static_cast<float>(h.lr);
  rule.first = p.grad();
  if (h.momentum == 0) {
    c.g_coef = 1;
    c.decay = decay_as_applied(h.lr, h.weight_decay);
    return;
  }
  const ParamStateView state = optimizer.state_of(p);
  if (!state.momentum_buffer.defined()) throw std::runtime_error("keel: SGD with momentum has no buffer after its step");
  rule.second = state.momentum_buffer;
  if (h.nesterov) {
    c.g_coef = 1;
    c.buf_coef = static_cast<float>(h.momentum);
    c.decay = decay_as_applied(h.lr, h.weight_decay);
  } else {
    c.buf_coef = 1;   // the buffer already carries the weight decay
  }
}

}  // namespace

bool has_update_rules(const OptimizerAdapter& optimizer) { return optimizer.kind() != OptimizerKind::kOther; }

bool steps_a_tensor_twice(const OptimizerAdapter& optimizer) {
  std::unordered_set<const void*> seen;
  for (size_t g = 0; g < optimizer.group_count(); ++g) {
    for (const auto& p : optimizer.group_params(g)) {
      if (!seen.insert(p.unsafeGetTensorImpl()).second) return true;
    }
  }
  return false;
}

LayerIndex::LayerIndex(const std::vector<torch::Tensor>& params) : layers(params.size()) {
  for (size_t i = 0; i < params.size(); ++i) layer_of[params[i].unsafeGetTensorImpl()] = i;
}

void read_update_rules(const OptimizerAdapter& optimizer, const LayerIndex& layers, std::vector<LayerUpdateRule>& rules) {
  rules.assign(layers.layers, LayerUpdateRule{});
  std::vector<bool> read(layers.layers, false);
  const auto& layer_of = layers.layer_of;
  const OptimizerKind kind = optimizer.kind();
  if (kind == OptimizerKind::kOther) throw std::runtime_error("keel: this optimizer's updates cannot be rebuilt");
  for (size_t g = 0; g < optimizer.group_count(); ++g) {
    const GroupHyperparameters h = optimizer.hyperparameters(g);
    for (const auto& p : optimizer.group_params(g)) {
      const auto found = layer_of.find(p.unsafeGetTensorImpl());
      if (found == layer_of.end()) continue;
      if (!read[found->second]) {
        read[found->second] = true;
      } else {
        throw std::runtime_error("keel: the optimizer holds one tensor twice and steps it twice; its update cannot be rebuilt");
      }
      LayerUpdateRule& rule = rules[found->second];
      if (kind == OptimizerKind::kSgd) {
        sgd_rule(optimizer, h, p, rule);
      } else {
        adam_rule(optimizer, h, p, /*decoupled_decay=*/kind == OptimizerKind::kAdamW, rule);
      }
    }
  }
}

std::vector<int> group_of_layers(const OptimizerAdapter& optimizer, const LayerIndex& layers) {
  std::vector<int> group_of(layers.layers, -1);
  for (size_t g = 0; g < optimizer.group_count(); ++g) {
    for (const auto& p : optimizer.group_params(g)) {
      const auto found = layers.layer_of.find(p.unsafeGetTensorImpl());
      if (found != layers.layer_of.end()) group_of[found->second] = static_cast<int>(g);
    }
  }
  return group_of;
}

bool plain_sgd_lrs(const OptimizerAdapter& optimizer, std::vector<double>& lrs) {
  lrs.clear();
  if (optimizer.kind() != OptimizerKind::kSgd) return false;
  for (size_t g = 0; g < optimizer.group_count(); ++g) {
    const GroupHyperparameters h = optimizer.hyperparameters(g);
    if (h.momentum != 0 || h.weight_decay != 0) return false;
    lrs.push_back(h.lr);
  }
  return true;
}

}  // namespace keel::probe
