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

// A copy of `host` (a snapshot's) on `like`'s device: into `live` when it is one of the same
// shape and type (the state keeps its tensors), else a new tensor. Never the snapshot's own.
torch::Tensor put_back(const torch::Tensor& host, const torch::Tensor& live, const torch::Tensor& param) {
  if (!host.defined()) return torch::Tensor();
  torch::NoGradGuard no_grad;
  if (live.defined() && live.sizes() == host.sizes() && live.dtype() == host.dtype()) {
    live.copy_(host);
    return live;
  }
  torch::Tensor fresh = torch::empty(host.sizes(), host.options().device(param.device()));
  fresh.copy_(host);
  return fresh;
}

template <class ParamState>
void hand_out_adam(ParamState& s, OptimizerStateTensors& out) {
  out.count = s.step();
  out.tensors = {s.exp_avg(), s.exp_avg_sq(), s.max_exp_avg_sq()};
}

template <class ParamState>
void put_back_adam(std::unique_ptr<torch::optim::OptimizerParamState>& slot, const OptimizerStateTensors& from,
                   const torch::Tensor& param) {
  if (from.tensors.size() != 3) throw std::runtime_error("keel: an Adam state snapshot holds 3 tensors");
  auto* s = dynamic_cast<ParamState*>(slot.get());
  if (s == nullptr) {
    slot = std::make_unique<ParamState>();
    s = static_cast<ParamState*>(slot.get());
  }
  s->step(from.count);
  s->exp_avg(put_back(from.tensors[0], s->exp_avg(), param));
  s->exp_avg_sq(put_back(from.tensors[1], s->exp_avg_sq(), param));
  s->max_exp_avg_sq(put_back(from.tensors[2], s->max_exp_avg_sq(), param));
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

bool LibtorchOptimizer::state_tensors(std::vector<OptimizerStateTensors>& out, std::string& why) {
  out.clear();
  if (kind_ == OptimizerKind::kOther) {
    why = "a libtorch optimizer other than AdamW, Adam or SGD";
    return false;
  }
  auto& state = optimizer_.state();
  for (const auto& group : optimizer_.param_groups()) {
    for (const torch::Tensor& param : group.params()) {
      OptimizerStateTensors& entry = out.emplace_back();
      const auto found = state.find(compat::optimizer_state_key(param));
      if (found == state.end()) continue;
      auto* s = found->second.get();
      if (auto* adamw = dynamic_cast<torch::optim::AdamWParamState*>(s)) {
        hand_out_adam(*adamw, entry);
      } else if (auto* adam = dynamic_cast<torch::optim::AdamParamState*>(s)) {
        hand_out_adam(*adam, entry);
      } else if (auto* sgd = dynamic_cast<torch::optim::SGDParamState*>(s)) {
        entry.count = 0;
        entry.tensors = {sgd->momentum_buffer()};
      } else {
        why = "a parameter's state is not its optimizer's kind";
        out.clear();
        return false;
      }
    }
  }
  return true;
}

void LibtorchOptimizer::restore_state_tensors(const std::vector<OptimizerStateTensors>& from) {
  auto& state = optimizer_.state();
  size_t i = 0;
  for (const auto& group : optimizer_.param_groups()) i += group.params().size();
  if (i != from.size()) {
    throw std::runtime_error("keel: the optimizer steps " + std::to_string(i) + " tensors, the snapshot holds " +
                             std::to_string(from.size()));
  }
  i = 0;
  for (const auto& group : optimizer_.param_groups()) {
    for (const torch::Tensor& param : group.params()) {
      const OptimizerStateTensors& entry = from[i++];
      const auto key = compat::optimizer_state_key(param);
      if (entry.count < 0) {
        state.erase(key);
        continue;
      }
      std::unique_ptr<torch::optim::OptimizerParamState>& slot = state[key];
      switch (kind_) {
        case OptimizerKind::kAdamW: put_back_adam<torch::optim::AdamWParamState>(slot, entry, param); break;
        case OptimizerKind::kAdam: put_back_adam<torch::optim::AdamParamState>(slot, entry, param); break;
        case OptimizerKind::kSgd: {
          auto* s = dynamic_cast<torch::optim::SGDParamState*>(slot.get());
          if (s == nullptr) {
            slot = std::make_unique<torch::optim::SGDParamState>();
            s = static_cast<torch::optim::SGDParamState*>(slot.get());
          }
          s->momentum_buffer(put_back(entry.tensors.at(0), s->momentum_buffer(), param));
          break;
        }
        case OptimizerKind::kOther: throw std::runtime_error("keel: this optimizer is restored from its archive");
      }
    }
  }
}

void LibtorchOptimizer::restore_serialised(const std::string& bytes) {
  torch::serialize::InputArchive archive;
  archive.load_from(bytes.data(), bytes.size());
  optimizer_.load(archive);
}

void LibtorchOptimizer::scale_learning_rates(double factor) {
  for (auto& group : optimizer_.param_groups()) group.options().set_lr(group.options().get_lr() * factor);
}

}  // namespace keel::probe
