#include "libtorch_optimizer.hpp"

#include <stdexcept>

#include "keel/probe/torch_compat.hpp"
#include "serialise_archive.hpp"

namespace keel::probe {
namespace {

OptimizerKind kind_of(torch::optim::Optimizer& optimizer) {
  if (dynamic_cast<torch::optim::AdamW*>(&optimizer) != nullptr) return OptimizerKind::kAdamW;
  if (dynamic_cast<torch::optim::Adam*>(&optimizer) != nullptr) return OptimizerKind::kAdam;
  if (dynamic_cast<torch::optim::SGD*>(&optimizer) != nullptr) return OptimizerKind::kSgd;
  return OptimizerKind::kOther;
}

template <class Options>
const Options& options_as(const torch::optim::OptimizerParamGroup& group) {
  const auto* options = dynamic_cast<const Options*>(&group.options());
  if (options == nullptr) throw std::runtime_error("keel: a parameter group's options do not match its optimizer");
  return *options;
}

template <class Options>
void read_adam(const Options& o, GroupHyperparameters& h) {
  h.weight_decay = o.weight_decay();
  h.beta1 = std::get<0>(o.betas());
  h.beta2 = std::get<1>(o.betas());
  h.eps = o.eps();
  h.amsgrad = o.amsgrad();
}

template <class ParamState>
void read_adam_state(const ParamState& s, ParamStateView& view) {
  view.step = s.step();
  view.exp_avg = s.exp_avg();
  view.exp_avg_sq = s.exp_avg_sq();
  view.max_exp_avg_sq = s.max_exp_avg_sq();
}

}  // namespace

LibtorchOptimizer::LibtorchOptimizer(torch::optim::Optimizer& optimizer)
    : optimizer_(optimizer), kind_(kind_of(optimizer)) {}

GroupHyperparameters LibtorchOptimizer::hyperparameters(size_t group) const {
  const auto& g = optimizer_.param_groups()[group];
  GroupHyperparameters h;
  h.lr = g.options().get_lr();
  switch (kind_) {
    case OptimizerKind::kAdamW: read_adam(options_as<torch::optim::AdamWOptions>(g), h); break;
    case OptimizerKind::kAdam: read_adam(options_as<torch::optim::AdamOptions>(g), h); break;
    case OptimizerKind::kSgd: {
      const auto& o = options_as<torch::optim::SGDOptions>(g);
      h.momentum = o.momentum();
      h.dampening = o.dampening();
      h.weight_decay = o.weight_decay();
      h.nesterov = o.nesterov();
      break;
    }
    case OptimizerKind::kOther: break;
  }
  return h;
}

ParamStateView LibtorchOptimizer::state_of(const torch::Tensor& param) const {
  ParamStateView view;
  auto& state = optimizer_.state();
  const auto found = state.find(compat::optimizer_state_key(param));
  if (found == state.end()) return view;
  view.present = true;
  const auto* s = found->second.get();
  if (const auto* adamw = dynamic_cast<const torch::optim::AdamWParamState*>(s)) {
    read_adam_state(*adamw, view);
  } else if (const auto* adam = dynamic_cast<const torch::optim::AdamParamState*>(s)) {
    read_adam_state(*adam, view);
  } else if (const auto* sgd = dynamic_cast<const torch::optim::SGDParamState*>(s)) {
    view.momentum_buffer = sgd->momentum_buffer();
  }
  return view;
}

std::string LibtorchOptimizer::serialise() { return serialise_archive(optimizer_); }

}  // namespace keel::probe
