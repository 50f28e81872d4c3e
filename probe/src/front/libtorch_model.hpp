// LibtorchModel: a libtorch torch::nn::Module as the probe's TrainedModel (the C++ front).
//
// identities() walks the module tree in place: named_parameters() builds every dotted name
// and an index of them each call (54 us of keel-demo's step for 42 names), and the probe asks
// for the identities at every step.
// Threads: the training thread. Never: touches tensor values (but serialise()).
#pragma once

#include <string>
#include <vector>

#include <torch/torch.h>

#include "keel/probe/trained_model.hpp"

namespace keel::probe {

class LibtorchModel final : public TrainedModel {
 public:
  // The module must outlive the adapter.
  explicit LibtorchModel(torch::nn::Module& model) : model_(model) {}
  void named_parameters(NamedTensors& out) override;
  void named_buffers(NamedTensors& out) override;
  void buffers(std::vector<torch::Tensor>& out) override;
  void identities(std::vector<const void*>& params, std::vector<const void*>* float_buffers) override;
  // torch::save's archive: torch::load(model, dir + "/model.pt") reads it back.
  std::string serialise() override;

 private:
  torch::nn::Module& model_;
};

}  // namespace keel::probe
