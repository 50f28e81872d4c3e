// What the probe's CUDA tests share: a model with a layer of each element type the fused pass
// reads natively, its backward, host copies of its gradients and weights, the gradient metrics
// checked against float64, step counts, quiet options, and a counter of host syncs. Every test
// reports as skipped (with the reason) where there is no CUDA device.
#pragma once

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "keel/probe/grad_scaler.hpp"
#include "keel/probe/probe.hpp"
#include "keel/probe/torch_compat.hpp"
#include "reference_stats.hpp"
#include "two_layer_net.hpp"


namespace keel::test::cuda_rig {

using keel::wire::LayerMetric;

#define SKIP_WITHOUT_DEVICE()                                                          \
  do {                                                                                 \
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device available to libtorch"; \
  } while (0)

// One layer of each element type the fused pass reads natively.
struct MixedPrecisionNetImpl : torch::nn::Module {
  MixedPrecisionNetImpl() {
    fc = register_module("fc", torch::nn::Linear(5, 64));
    mid = register_module("mid", torch::nn::Linear(64, 32));
    out = register_module("out", torch::nn::Linear(32, 3));
    to(torch::kCUDA);
    mid->to(torch::kBFloat16);
    out->to(torch::kDouble);
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto h = torch::tanh(fc->forward(x)).to(torch::kBFloat16);
    h = torch::tanh(mid->forward(h)).to(torch::kDouble);
    return out->forward(h).to(torch::kFloat);
  }
  torch::nn::Linear fc{nullptr}, mid{nullptr}, out{nullptr};
};
TORCH_MODULE(MixedPrecisionNet);

inline torch::Tensor backward(MixedPrecisionNet& net, torch::optim::Optimizer& opt, int64_t seed, double loss_scale = 1.0) {
  torch::manual_seed(seed);
  opt.zero_grad();
  auto x = torch::randn({16, 5}, torch::TensorOptions().device(torch::kCUDA));
  auto loss = net->forward(x).pow(2).mean();
  (loss * loss_scale).backward();
  return loss.detach();
}

inline std::vector<torch::Tensor> grads_on_host(MixedPrecisionNet& net) {
  std::vector<torch::Tensor> out;
  for (auto& p : net->parameters()) out.push_back(p.grad().detach().to(torch::kCPU));
  return out;
}

inline std::vector<torch::Tensor> on_host(const std::vector<torch::Tensor>& tensors) {
  std::vector<torch::Tensor> out;
  for (const auto& t : tensors) out.push_back(t.to(torch::kCPU));
  return out;
}

inline void expect_grad_metrics(const keel::probe::Probe& probe, const std::vector<torch::Tensor>& grads, double divide_by) {
  const auto& record = probe.last_record();
  ASSERT_EQ(record.layer_count, grads.size());
  for (size_t i = 0; i < grads.size(); ++i) {
    SCOPED_TRACE(probe.description().layers[i].name);
    const auto ref = keel::test::reference_grad(grads[i].to(torch::kDouble) / divide_by);
    EXPECT_TRUE(keel::test::close_rel(record.layer_value(LayerMetric::kGradNorm, i), ref.norm, 1e-6));
    EXPECT_TRUE(keel::test::close_rel(record.layer_value(LayerMetric::kGradAbsmax, i), ref.absmax, 1e-6));
    EXPECT_EQ(record.layer_value(LayerMetric::kGradNonfinite, i), static_cast<float>(ref.nonfinite));
    EXPECT_TRUE(keel::test::close_rel(record.layer_value(LayerMetric::kGradZeroFrac, i), ref.zero_frac, 1e-6));
  }
}

inline int64_t adamw_step_count(torch::optim::Optimizer& opt, const torch::Tensor& p) {
  return static_cast<torch::optim::AdamWParamState&>(*opt.state().at(keel::probe::compat::optimizer_state_key(p))).step();
}

inline int64_t adam_step_count(torch::optim::Optimizer& opt, const torch::Tensor& p) {
  return static_cast<torch::optim::AdamParamState&>(*opt.state().at(keel::probe::compat::optimizer_state_key(p))).step();
}

inline keel::probe::ProbeOptions quiet_options() {
  keel::probe::ProbeOptions options;
  options.endpoint = "";
  options.dump_on_nonfinite = false;
  options.record_dir = "";
  return options;
}

// Counts c10's "synchronizing CUDA operation" warnings while sync debug mode is on.
class SyncCounter : public c10::WarningHandler {
 public:
  SyncCounter() : previous_(c10::WarningUtils::get_warning_handler()) {
    c10::WarningUtils::set_warning_handler(this);
    c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_WARN);
  }
  ~SyncCounter() override {
    c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_DISABLED);
    c10::WarningUtils::set_warning_handler(previous_);
  }
  void process(const c10::Warning& warning) override {
    if (warning.msg().find("synchroniz") != std::string::npos) ++count;
  }
  int64_t count = 0;

 private:
  c10::WarningHandler* previous_;
};

}  // namespace keel::test::cuda_rig
