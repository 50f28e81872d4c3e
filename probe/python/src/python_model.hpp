// PythonModel: a PyTorch nn.Module as the probe's TrainedModel (the Python front).
//
// Reads the module as nn.Module.named_parameters(remove_duplicate=False) lists it (each
// module's own, modules in pre-order, a tensor once per name), and identities() walks the
// same dicts (_parameters, _buffers, _modules) without building a name. A sharded parameter is
// what LocalShards measures for it (an FSDP1 flat parameter: a tensor per original parameter),
// and names leave out the modules FSDP1 wraps the user's in, as FSDP's state_dict() does.
// Threads: the training thread, holding the GIL (every call comes from probe.step(), a
// Python call). Never: touches tensor values (but serialise()).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <pybind11/pybind11.h>
#include <torch/torch.h>

#include "keel/probe/trained_model.hpp"
#include "local_shards.hpp"

namespace keel::python {

class PythonModel final : public probe::TrainedModel {
 public:
  // `shards`: the leaves keel measures in place of the module's DTensor parameters.
  PythonModel(pybind11::object module, std::shared_ptr<const LocalShards> shards);
  void named_parameters(probe::NamedTensors& out) override;
  void named_buffers(probe::NamedTensors& out) override;
  void buffers(std::vector<torch::Tensor>& out) override;
  void identities(std::vector<const void*>& params, std::vector<const void*>* float_buffers) override;
  // FSDP's flat parameters (FlatParameter, which FSDP marks _is_flat_param): a shard between
  // steps, the whole parameter in forward and backward. And keel's leaves over DTensors' local
  // parts, which backward never reaches.
  bool data_swapped(const torch::Tensor& param) const override;
  // torch.save(module.state_dict()): torch.load(dir + "/model.pt") reads it back.
  std::string serialise() override;

 private:
  pybind11::object module_;
  std::shared_ptr<const LocalShards> shards_;
};

}  // namespace keel::python
