// PythonOptimizer: a torch.optim optimizer as the probe's OptimizerAdapter (the Python front).
//
// Any torch.optim.Optimizer is stepped by its own step(). torch.optim.AdamW, Adam and SGD are
// known kinds: their groups' hyperparameters and their tensors' state (optimizer.state) are
// read for the update rules, but an Adam's whose step counts live on the device (fused or
// capturable groups: state_on_host()). Their deferred step (DESIGN §8) is their own fused step
// (fused=True), which reads the probe's found_inf on the device as it reads GradScaler's and
// takes its step counts back itself when the step is skipped.
// The groups are read again as each step begins (begin_step()): an lr schedule, or the user,
// changes them between steps.
// Threads: the training thread, holding the GIL.
#pragma once

#include <string>
#include <vector>

#include <pybind11/pybind11.h>
#include <torch/torch.h>

#include "keel/probe/optimizer_adapter.hpp"

namespace keel::python {

class PythonOptimizer final : public probe::OptimizerAdapter {
 public:
  explicit PythonOptimizer(pybind11::object optimizer);
  void begin_step() override;
  probe::OptimizerKind kind() const override { return kind_; }
  size_t group_count() const override { return groups_.size(); }
  const std::vector<torch::Tensor>& group_params(size_t group) const override { return groups_[group].params; }
  probe::GroupHyperparameters hyperparameters(size_t group) const override { return groups_[group].hyper; }
  probe::ParamStateView state_of(const torch::Tensor& param) const override;
  // Not for an Adam or AdamW with a fused or capturable group: their step counts live on the
  // device, and reading them would wait once per tensor.
  bool state_on_host() const override { return state_on_host_; }
  void step() override;

  // fused=True in every group, on `device` (the kernels of torch.optim's fused steps).
  bool supports_deferred_step(const torch::Device& device, std::string& why) override;
  void deferred_step(const torch::Tensor& found_inf) override;
  bool deferred_step_enqueued() const override { return enqueued_; }
  // The fused step took its own step counts back on the device: nothing is left to undo.
  void settle_deferred_step(bool /*applied*/) override {}

  // torch.save(optimizer.state_dict()): optimizer.load_state_dict(torch.load(...)) reads it.
  std::string serialise() override;

 private:
  struct Group {
    std::vector<torch::Tensor> params;
    probe::GroupHyperparameters hyper;
    bool fused = false;
    bool capturable = false;
  };
  pybind11::object optimizer_;
  probe::OptimizerKind kind_;
  std::vector<Group> groups_;
  bool state_on_host_ = true;
  bool enqueued_ = false;
};

}  // namespace keel::python
