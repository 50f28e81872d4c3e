// PythonOptimizer: a torch.optim optimizer as the probe's OptimizerAdapter (the Python front).
//
// Any torch.optim.Optimizer is stepped by its own step(). torch.optim.AdamW, Adam and SGD are
// known kinds: their groups' hyperparameters and their tensors' state (optimizer.state) are
// read for the update rules. Their deferred step (DESIGN §8) is their own fused step
// (fused=True), which reads the probe's found_inf on the device as it reads GradScaler's and
// takes its step counts back itself when the step is skipped.
// An Adam's fused or capturable groups keep each tensor's step count on the device, where
// reading it would wait once per tensor. Their counts are kept on the host instead: each is
// read once (the first step that finds a step tensor it does not know: at the start, or after
// load_state_dict) and counted from then on, one per step that steps the tensor (it has a
// gradient); a deferred step's are counted as applied and taken back if its verdict says it
// was skipped, as the fused step takes back the device's.
// The groups are read again as each step begins (begin_step()): an lr schedule, or the user,
// changes them between steps.
// Threads: the training thread, holding the GIL.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <pybind11/pybind11.h>
#include <torch/torch.h>

#include "keel/probe/optimizer_adapter.hpp"
#include "local_shards.hpp"

namespace keel::python {

class PythonOptimizer final : public probe::OptimizerAdapter {
 public:
  // `shards`: the leaves keel measures in place of DTensor parameters (the model's).
  PythonOptimizer(pybind11::object optimizer, std::shared_ptr<const LocalShards> shards);
  void begin_step() override;
  probe::OptimizerKind kind() const override { return kind_; }
  size_t group_count() const override { return groups_.size(); }
  const std::vector<torch::Tensor>& group_params(size_t group) const override { return groups_[group].params; }
  probe::GroupHyperparameters hyperparameters(size_t group) const override { return groups_[group].hyper; }
  probe::ParamStateView state_of(const torch::Tensor& param) const override;
  void step() override;

  // fused=True in every group, on `device` (the kernels of torch.optim's fused steps).
  bool supports_deferred_step(const torch::Device& device, std::string& why) override;
  void deferred_step(const torch::Tensor& found_inf) override;
  bool deferred_step_enqueued() const override { return enqueued_; }
  // The fused step took its own step counts back on the device; the host's counts follow.
  void settle_deferred_step(bool applied) override;

  // torch.save(optimizer.state_dict()): optimizer.load_state_dict(torch.load(...)) reads it.
  std::string serialise() override;
  // A snapshot's view of torch.optim's AdamW, Adam and SGD state over plain parameters: each
  // parameter's state tensors as they live, in the order of state_keys() (the snapshot copies
  // them with no wait on a device), and its step count as the host keeps it. False, and the
  // snapshot keeps serialise()'s bytes, for another optimizer, a sharded parameter (FSDP,
  // DTensor: their state_dict knows their layout), or a state keel does not know (a key of
  // its own, a step kept as a number).
  bool state_tensors(std::vector<probe::OptimizerStateTensors>& out, std::string& why) override;
  // Writes the host copies back into each parameter's state: into its own tensors where their
  // shape and type still match (a device copy, no new tensor), else into new ones on its
  // device (a step count on the host, as torch.optim keeps it, unless the group is fused or
  // capturable); a parameter with no state in the snapshot has none after. The host's step
  // counts follow. Checks every entry before it writes any.
  void restore_state_tensors(const std::vector<probe::OptimizerStateTensors>& from) override;
  // A rewind's restore of serialise()'s bytes: torch.load, then the optimizer's own
  // load_state_dict (which puts each tensor on its parameter's device).
  void restore_serialised(const std::string& bytes) override;
  // Every param_group's "lr" multiplied (in place when it is a tensor, as a capturable or
  // fused optimizer may keep it); begin_step() reads it back.
  void scale_learning_rates(double factor) override;

 private:
  struct Group {
    std::vector<torch::Tensor> params;
    probe::GroupHyperparameters hyper;
    bool fused = false;
    bool capturable = false;
  };
  // A step count kept on the host, of the step tensor it was read from (held, so that its
  // identity means the same tensor).
  struct StepCount {
    torch::Tensor step_tensor;
    int64_t count = 0;
  };
  // The state keys a snapshot hands out for this kind, in order.
  const std::vector<const char*>& state_keys() const;
  // After the optimizer's own step: counts the step of every tensor of a fused or capturable
  // Adam group that had a gradient; `deferred`: as applied, until settle_deferred_step.
  void count_device_steps(bool deferred);

  pybind11::object optimizer_;
  std::shared_ptr<const LocalShards> shards_;
  probe::OptimizerKind kind_;
  std::vector<Group> groups_;
  bool counts_on_device_ = false;   // an Adam with a fused or capturable group
  bool enqueued_ = false;
  std::unordered_map<const c10::TensorImpl*, StepCount> step_counts_;   // by parameter
  std::vector<StepCount*> counted_unsettled_;   // counted by the last deferred step
};

}  // namespace keel::python
