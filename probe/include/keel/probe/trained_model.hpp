// TrainedModel: what the probe reads of the model it measures, whichever front holds it.
//
// What it is for: the probe's core measures named tensors, not a torch::nn::Module. The C++
// front (front/libtorch_model.hpp) reads a libtorch module; the Python front reads an
// nn.Module through the same five calls. The core re-reads the tensors' identities at every
// step and the names only when those changed (ParameterLayout), so a model may gain, lose or
// move parameters between steps.
// Threads: the training thread only. Never: touches tensor values (but serialise()).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

namespace keel::probe {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

class TrainedModel {
 public:
  virtual ~TrainedModel() = default;
  // Every parameter under every name it has, in the model's order (each module's own, modules
  // in pre-order): a tensor registered under two names is listed twice. Undefined ones (a
  // parameter registered as none) are left out.
  virtual void named_parameters(NamedTensors& out) = 0;
  // Every buffer under every name it has, in the same order, integer ones too.
  virtual void named_buffers(NamedTensors& out) = 0;
  // The same buffers with no names built: what a re-run of a step saves and puts back, at
  // every step of the closure form.
  virtual void buffers(std::vector<torch::Tensor>& out) = 0;
  // The tensors' identities (TensorImpl addresses) in named_parameters()' order into `params`,
  // and with `float_buffers` the floating-point buffers' in named_buffers()' order: read at
  // every step, so it builds no names and allocates nothing once the vectors have grown.
  virtual void identities(std::vector<const void*>& params, std::vector<const void*>* float_buffers) = 0;
  // Whether a wrapper replaces this parameter's data between steps and forward passes (FSDP's
  // flat parameters: a shard between steps, gathered whole for forward and backward). The probe
  // then holds no gradient accumulator of it: one made while it is a shard expects a shard's
  // gradient, and autograd would refuse the whole one backward brings it. Asked when the
  // probe plans a layout.
  virtual bool data_swapped(const torch::Tensor& /*param*/) const { return false; }
  // The bytes of a dump's model.pt, which the front's own loader reads back.
  virtual std::string serialise() = 0;
};

}  // namespace keel::probe
