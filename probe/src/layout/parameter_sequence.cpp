#include "parameter_sequence.hpp"

namespace keel::probe {
namespace {

// A module's own parameters, which named_parameters(/*recurse=*/false) copies with their names
// each call: the member is protected, and a pointer to it formed here reads it in place.
struct OwnParameters : torch::nn::Module {
  static const torch::OrderedDict<std::string, torch::Tensor>& of(const torch::nn::Module& module) {
    return module.*(&OwnParameters::parameters_);
  }
};

}  // namespace

namespace {

// Pre-order, as Module::apply, without the dotted names apply builds for every module.
void walk(const torch::nn::Module& module, std::vector<const void*>& out, std::vector<const void*>* float_buffers) {
  for (const auto& parameter : OwnParameters::of(module)) {
    // As named_parameters() lists them: an undefined one (registered as none) is not there.
    if (parameter.value().defined()) out.push_back(parameter.value().unsafeGetTensorImpl());
  }
  if (float_buffers != nullptr) {
    // A module's own buffers (few, short names); most modules have none.
    for (const auto& buffer : module.named_buffers(/*recurse=*/false)) {
      const torch::Tensor& t = buffer.value();
      if (t.defined() && t.is_floating_point()) float_buffers->push_back(t.unsafeGetTensorImpl());
    }
  }
  for (const auto& child : module.children()) walk(*child, out, float_buffers);
}

}  // namespace

void parameter_sequence(const torch::nn::Module& model, torch::optim::Optimizer* optimizer,
                        std::vector<const void*>& out, std::vector<const void*>* float_buffers) {
  out.clear();
  if (float_buffers) float_buffers->clear();
  walk(model, out, float_buffers);
  if (optimizer == nullptr) return;
  for (const auto& group : optimizer->param_groups()) {
    out.push_back(nullptr);   // a group's start: a parameter moved between groups is a change
    for (const auto& p : group.params()) out.push_back(p.unsafeGetTensorImpl());
  }
}

}  // namespace keel::probe
