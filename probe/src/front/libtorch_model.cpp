#include "libtorch_model.hpp"

#include "serialise_archive.hpp"

namespace keel::probe {
namespace {

// A module's own parameters, buffers and children, which named_parameters(false),
// named_buffers(false) and children() copy (names, shared pointers, an allocation per module)
// each call. At 2,000 tensors those copies were a sixth of the probe's time on the training
// thread. parameters_ is protected: a pointer to it formed in a subclass reads it in place.
// buffers_ and children_ are private: an explicit instantiation may name a private member
// (the standard exempts it from access checks, [temp.spec.general]), and MemberPointer hands
// the pointer out through a friend function. Only reads, never writes, go through them.
using Tensors = torch::OrderedDict<std::string, torch::Tensor>;
using Children = torch::OrderedDict<std::string, std::shared_ptr<torch::nn::Module>>;

struct BuffersMember {
  using type = Tensors torch::nn::Module::*;
  friend type member(BuffersMember);
};
struct ChildrenMember {
  using type = Children torch::nn::Module::*;
  friend type member(ChildrenMember);
};

template <typename Tag, typename Tag::type Pointer>
struct MemberPointer {
  friend typename Tag::type member(Tag) { return Pointer; }
};
template struct MemberPointer<BuffersMember, &torch::nn::Module::buffers_>;
template struct MemberPointer<ChildrenMember, &torch::nn::Module::children_>;

struct ModuleMembers : torch::nn::Module {
  static const Tensors& parameters_of(const torch::nn::Module& module) { return module.*(&ModuleMembers::parameters_); }
  static const Tensors& buffers_of(const torch::nn::Module& module) { return module.*member(BuffersMember{}); }
  static const Children& children_of(const torch::nn::Module& module) { return module.*member(ChildrenMember{}); }
};

// Pre-order, as Module::apply, without the dotted names apply builds for every module.
void walk(const torch::nn::Module& module, std::vector<const void*>& out, std::vector<const void*>* float_buffers) {
  for (const auto& parameter : ModuleMembers::parameters_of(module)) {
    // As named_parameters() lists them: an undefined one (registered as none) is not there.
    if (parameter.value().defined()) out.push_back(parameter.value().unsafeGetTensorImpl());
  }
  if (float_buffers != nullptr) {
    // A module's own buffers (few, short names); most modules have none.
    for (const auto& buffer : ModuleMembers::buffers_of(module)) {
      const torch::Tensor& t = buffer.value();
      if (t.defined() && t.is_floating_point()) float_buffers->push_back(t.unsafeGetTensorImpl());
    }
  }
  for (const auto& child : ModuleMembers::children_of(module)) walk(*child.value(), out, float_buffers);
}

void copy_pairs(const torch::OrderedDict<std::string, torch::Tensor>& named, NamedTensors& out) {
  out.clear();
  out.reserve(named.size());
  for (const auto& item : named) {
    if (item.value().defined()) out.emplace_back(item.key(), item.value());
  }
}

}  // namespace

void LibtorchModel::named_parameters(NamedTensors& out) { copy_pairs(model_.named_parameters(/*recurse=*/true), out); }

void LibtorchModel::named_buffers(NamedTensors& out) { copy_pairs(model_.named_buffers(/*recurse=*/true), out); }

void LibtorchModel::buffers(std::vector<torch::Tensor>& out) {
  out.clear();
  model_.apply([&out](const torch::nn::Module& module) {
    for (const auto& buffer : ModuleMembers::buffers_of(module)) {
      if (buffer.value().defined()) out.push_back(buffer.value());
    }
  });
}

void LibtorchModel::identities(std::vector<const void*>& params, std::vector<const void*>* float_buffers) {
  params.clear();
  if (float_buffers) float_buffers->clear();
  walk(model_, params, float_buffers);
}

std::string LibtorchModel::serialise() { return serialise_archive(model_); }

}  // namespace keel::probe
