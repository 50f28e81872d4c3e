// LibtorchOptimizer: a libtorch torch::optim::Optimizer as the probe's OptimizerAdapter (the
// C++ front).
//
// AdamW, Adam and SGD are known kinds: their groups' options and their tensors' states are
// read as the update rules need them, and their deferred step is ATen's fused one
// (FusedOptimizerStep). Any other optimizer is kOther: its lr is read, and it is stepped by its
// own step().
// Threads: the training thread. Never: changes the optimizer outside step(), deferred_step()
// and settle_deferred_step().
#pragma once

#include <string>
#include <vector>

#include <torch/torch.h>

#include "front/fused_step.hpp"
#include "keel/probe/optimizer_adapter.hpp"

namespace keel::probe {

class LibtorchOptimizer final : public OptimizerAdapter {
 public:
  // The optimizer must outlive the adapter.
  explicit LibtorchOptimizer(torch::optim::Optimizer& optimizer);
  OptimizerKind kind() const override { return kind_; }
  size_t group_count() const override { return optimizer_.param_groups().size(); }
  const std::vector<torch::Tensor>& group_params(size_t group) const override {
    return optimizer_.param_groups()[group].params();
  }
  // Throws std::runtime_error when a known kind's group holds another kind's options.
  GroupHyperparameters hyperparameters(size_t group) const override;
  ParamStateView state_of(const torch::Tensor& param) const override;
  void step() override { optimizer_.step(); }

  bool supports_deferred_step(const torch::Device& device, std::string& why) override {
    return FusedOptimizerStep::supports(optimizer_, device, why);
  }
  void deferred_step(const torch::Tensor& found_inf) override { fused_.step(optimizer_, found_inf); }
  bool deferred_step_enqueued() const override { return fused_.enqueued(); }
  void settle_deferred_step(bool applied) override { fused_.settle(applied); }

  // torch::save's archive: torch::load(optimizer, dir + "/optimizer.pt") reads it back.
  std::string serialise() override;
  // AdamW, Adam and SGD hand their state out as tensors; any other kind is restored from
  // serialise()'s archive (torch::load's own path).
  bool state_tensors(std::vector<OptimizerStateTensors>& out, std::string& why) override;
  void restore_state_tensors(const std::vector<OptimizerStateTensors>& from) override;
  void restore_serialised(const std::string& bytes) override;
  // Every group's OptimizerOptions::set_lr (any torch::optim kind).
  void scale_learning_rates(double factor) override;

 private:
  torch::optim::Optimizer& optimizer_;
  OptimizerKind kind_;
  FusedOptimizerStep fused_;
};

}  // namespace keel::probe
