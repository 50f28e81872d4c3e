// The reductions' backends behind their one interface (reduction_backend.hpp): the CPU fused
// backend and the generic ATen backend measure the same layers alike, and LayerReducer hands
// each layer to one backend, against an independent float64 reference. (The CUDA backend is
// checked on a device by keel_cuda_probe_tests.)
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "front/libtorch_optimizer.hpp"
#include "reduce/cpu_fused_reductions.hpp"
#include "reduce/generic_reductions.hpp"
#include "reduce/layer_reducer.hpp"
#include "reference_stats.hpp"

namespace {

using keel::probe::CpuFusedReductions;
using keel::probe::GenericReductions;
using keel::probe::LayerReducer;
using keel::probe::LayerSums;
using keel::probe::ReductionBackend;
using keel::test::close_rel;
using keel::test::reference_grad;
using keel::test::reference_norm;

// fp32 CPU layers with gradients that cover the cases a step meets: ordinary values, exact
// zeros, a NaN and an Inf, values past fp32's square range (1e20) and below it (1e-25), and
// a layer of one element.
std::vector<torch::Tensor> fp32_layers(uint64_t seed) {
  torch::manual_seed(seed);
  std::vector<torch::Tensor> params;
  for (int64_t numel : {4099, 1, 300, 2048}) params.push_back(torch::randn({numel}).requires_grad_());
  std::vector<torch::Tensor> grads{torch::randn({4099}), torch::full({1}, -3.5f), torch::randn({300}) * 1e20,
                                   torch::randn({2048}) * 1e-25};
  grads[0].narrow(0, 100, 50).zero_();
  grads[0][7] = std::numeric_limits<float>::quiet_NaN();
  grads[2][11] = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < params.size(); ++i) params[i].mutable_grad() = grads[i];
  return params;
}

// The same layers with their own copies of weights and gradients (an unscale writes in place).
std::vector<torch::Tensor> copies_of(const std::vector<torch::Tensor>& params) {
  std::vector<torch::Tensor> out;
  for (const auto& p : params) {
    auto c = p.detach().clone().requires_grad_();
    c.mutable_grad() = p.grad().clone();
    out.push_back(c);
  }
  return out;
}

std::vector<size_t> every_layer(const std::vector<torch::Tensor>& params) {
  std::vector<size_t> layers(params.size());
  for (size_t i = 0; i < layers.size(); ++i) layers[i] = i;
  return layers;
}

void expect_grads_match_reference(const LayerSums& sums, const std::vector<torch::Tensor>& params,
                                  const char* backend) {
  for (size_t i = 0; i < params.size(); ++i) {
    SCOPED_TRACE(std::string(backend) + ", layer " + std::to_string(i));
    const auto ref = reference_grad(params[i].grad());
    EXPECT_TRUE(close_rel(std::sqrt(sums.grads[i].sumsq), ref.norm, 1e-6));
    EXPECT_TRUE(close_rel(sums.grads[i].absmax, ref.absmax, 0));
    EXPECT_EQ(sums.grads[i].nonfinite, ref.nonfinite);
    EXPECT_EQ(static_cast<double>(sums.grads[i].zeros) / static_cast<double>(params[i].numel()), ref.zero_frac);
  }
}

TEST(ReductionBackends, TheCpuFusedAndGenericBackendsMeasureTheSameGradientsAlike) {
  const auto original = fp32_layers(7);
  auto cpu_params = copies_of(original);
  auto generic_params = copies_of(original);
  CpuFusedReductions cpu(cpu_params, /*measure_in_backward=*/true);
  GenericReductions generic(generic_params);
  const auto layers = every_layer(original);
  const float unscale = 0.25f;
  cpu.begin_grads(unscale);
  generic.begin_grads(unscale);
  for (size_t i : layers) {
    ASSERT_TRUE(cpu.take_grad(i, cpu_params[i].grad())) << "layer " << i;
    ASSERT_TRUE(generic.take_grad(i, generic_params[i].grad())) << "layer " << i;
  }
  LayerSums cpu_sums(layers.size()), generic_sums(layers.size());
  cpu.enqueue_grads(unscale);
  cpu.collect_grads(cpu_sums);
  generic.enqueue_grads(unscale);
  generic.collect_grads(generic_sums);

  for (size_t i : layers) {
    SCOPED_TRACE("layer " + std::to_string(i));
    // Unscaled in place, element by element the same fp32 product.
    const auto expected = original[i].grad() * unscale;
    EXPECT_TRUE(torch::allclose(cpu_params[i].grad(), expected, 0, 0, /*equal_nan=*/true));
    EXPECT_TRUE(torch::allclose(generic_params[i].grad(), expected, 0, 0, /*equal_nan=*/true));
  }
  expect_grads_match_reference(cpu_sums, cpu_params, "cpu fused");
  expect_grads_match_reference(generic_sums, generic_params, "generic");
}

TEST(ReductionBackends, EachBackendMeasuresTheUpdateAgainstTheWeightsBeforeIt) {
  const auto original = fp32_layers(11);
  std::vector<std::vector<torch::Tensor>> params{copies_of(original), copies_of(original)};
  CpuFusedReductions cpu(params[0], /*measure_in_backward=*/true);
  GenericReductions generic(params[1]);
  std::vector<ReductionBackend*> backends{&cpu, &generic};
  const char* names[] = {"cpu fused", "generic"};
  const auto layers = every_layer(original);

  for (size_t b = 0; b < backends.size(); ++b) {
    SCOPED_TRACE(names[b]);
    for (size_t i : layers) ASSERT_TRUE(backends[b]->takes_weights(i, /*for_update=*/true));
    LayerSums sums(layers.size());
    std::vector<torch::Tensor> before;
    for (const auto& p : params[b]) before.push_back(p.detach().clone());
    backends[b]->enqueue_weights(layers, /*for_update=*/true);
    backends[b]->collect_weights(sums);
    {
      torch::NoGradGuard no_grad;
      for (size_t i : layers) params[b][i].add_(torch::randn_like(params[b][i]) * 1e-3);
    }
    backends[b]->enqueue_updates(layers);
    backends[b]->collect_updates(/*applied=*/true, sums);
    for (size_t i : layers) {
      SCOPED_TRACE("layer " + std::to_string(i));
      const auto after = params[b][i].detach();
      EXPECT_TRUE(close_rel(std::sqrt(sums.param_sumsq[i]), reference_norm(before[i]), 1e-6));
      EXPECT_TRUE(close_rel(std::sqrt(sums.update_sumsq[i]), reference_norm(after - before[i]), 1e-5));
      EXPECT_TRUE(close_rel(std::sqrt(sums.next_param_sumsq[i]), reference_norm(after), 1e-6));
    }

    // The copy follows W: a second update with W left alone measures zero.
    backends[b]->enqueue_updates(layers);
    backends[b]->collect_updates(/*applied=*/true, sums);
    for (size_t i : layers) EXPECT_EQ(sums.update_sumsq[i], 0.0) << "layer " << i;
  }
}

// A plain SGD step moves W by -lr * g: its update is read off the gradient pass, with each
// layer's group lr and nothing for a layer the optimizer does not hold, and no copy of W is
// made. Once a group turns to momentum the update is not -lr * g any more: measured against a
// copy again, from the next step on. Holding the whole model, the backend reads nothing after
// a plain step (|W_new|^2 is left to the next step's read of W); holding part of it (another
// backend has a float64 layer), it reads |W_new|^2 for its layers.
TEST(ReductionBackends, APlainSgdStepIsMeasuredFromItsGradientsWithNoCopyOfTheWeights) {
  for (const bool whole_model : {true, false}) {
    SCOPED_TRACE(whole_model ? "the whole model" : "part of the model");
    torch::manual_seed(13);
    std::vector<torch::Tensor> params;
    for (int64_t numel : {4099, 300, 2048, 17}) params.push_back(torch::randn({numel}).requires_grad_());
    if (!whole_model) params.push_back(torch::randn({5}, torch::kDouble).requires_grad_());
    torch::optim::SGD sgd({params[0], params[1]}, torch::optim::SGDOptions(0.1));
    sgd.add_param_group(torch::optim::OptimizerParamGroup({params[2]}, std::make_unique<torch::optim::SGDOptions>(0.02)));
    CpuFusedReductions cpu(params, /*measure_in_backward=*/true);
    const keel::probe::LibtorchOptimizer adapter(sgd);
    cpu.measure_updates_of(&adapter);
    const std::vector<size_t> layers{0, 1, 2, 3};   // the fp32 ones
    for (int step = 0; step < 4; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      const bool momentum = step >= 2;
      if (step == 2) {
        for (auto& group : sgd.param_groups()) static_cast<torch::optim::SGDOptions&>(group.options()).momentum(0.9);
      }
      for (auto& p : params) p.mutable_grad() = torch::randn_like(p) * 0.5;
      // At step 1 layer 1 has no gradient (unused): the optimizer passes it by, and the
      // gradient pass, which weighs the others with the whole model, does not reach it.
      if (step == 1) params[1].mutable_grad() = torch::Tensor();
      LayerSums sums(params.size());
      // As the probe does: planned before the gradient pass, which may weigh W too.
      cpu.plan_update(/*grads_this_step=*/true);
      const float unscale = step == 0 ? 0.5f : 1.0f;   // an unscale too, once
      cpu.begin_grads(unscale);
      for (size_t i : layers) {
        if (params[i].grad().defined()) {
          ASSERT_TRUE(cpu.take_grad(i, params[i].grad()));
        }
      }
      cpu.enqueue_grads(unscale);
      cpu.collect_grads(sums);
      // A plain step needs no copy; the first step with momentum finds none current, and the
      // next one finds the copy its update pass refreshed.
      EXPECT_EQ(cpu.update_needs_no_copy(), step != 2);
      std::vector<torch::Tensor> before;
      for (const auto& p : params) before.push_back(p.detach().clone());
      cpu.enqueue_weights(layers, /*for_update=*/true);
      cpu.collect_weights(sums);
      EXPECT_EQ(cpu.copy_bytes() > 0, momentum);
      sgd.step();
      cpu.enqueue_updates(layers);
      cpu.collect_updates(/*applied=*/true, sums);
      const bool next_norms = momentum || !whole_model;
      EXPECT_EQ(cpu.measured_next_norms(), next_norms);
      for (size_t i : layers) {
        SCOPED_TRACE("layer " + std::to_string(i));
        const auto after = params[i].detach();
        EXPECT_TRUE(close_rel(std::sqrt(sums.param_sumsq[i]), reference_norm(before[i]), 1e-6));
        EXPECT_TRUE(close_rel(std::sqrt(sums.update_sumsq[i]), reference_norm(after - before[i]), 1e-5));
        if (next_norms) {
          EXPECT_TRUE(close_rel(std::sqrt(sums.next_param_sumsq[i]), reference_norm(after), 1e-6));
        }
      }
      EXPECT_EQ(sums.update_sumsq[3], 0.0);   // not the optimizer's
    }
  }
}

TEST(LayerReducer, HandsEachLayerToOneBackendAndMeasuresEveryKindAgainstFloat64) {
  torch::manual_seed(3);
  std::vector<torch::Tensor> params{
      torch::randn({64, 32}).requires_grad_(),                                // CPU fused
      torch::randn({16, 8}, torch::kDouble).requires_grad_(),                 // generic: fp64
      torch::randn({32, 64}).t().requires_grad_(),                            // generic: strided
      torch::randn({40}, torch::kBFloat16).requires_grad_(),                  // generic: bf16
      torch::randn({12}).requires_grad_(),                                    // no gradient
  };
  for (size_t i = 0; i + 1 < params.size(); ++i) params[i].mutable_grad() = torch::randn_like(params[i]);
  params[2].mutable_grad() = torch::randn({32, 64}).t();   // a strided gradient too
  std::vector<torch::Tensor> grads_before;
  for (size_t i = 0; i + 1 < params.size(); ++i) grads_before.push_back(params[i].grad().clone());

  LayerReducer reducer(params, /*measure_in_backward=*/true);
  const float unscale = 0.5f;
  reducer.enqueue_grads(unscale);
  reducer.finish_grads();
  reducer.collect_grads();
  const auto& grads = reducer.grad_stats();
  for (size_t i = 0; i + 1 < params.size(); ++i) {
    SCOPED_TRACE("layer " + std::to_string(i));
    // Every layer unscaled exactly once, whichever backend took it.
    const auto expected = grads_before[i].to(torch::kDouble) * unscale;
    EXPECT_TRUE(torch::allclose(params[i].grad().to(torch::kDouble), expected, 0, 0));
    const auto ref = reference_grad(params[i].grad());
    EXPECT_TRUE(close_rel(std::sqrt(grads[i].sumsq), ref.norm, 1e-6));
    EXPECT_TRUE(close_rel(grads[i].absmax, ref.absmax, 1e-7));
    EXPECT_EQ(grads[i].nonfinite, 0);
  }
  // No gradient: all zeros, every element counted as zero.
  EXPECT_EQ(grads[4].sumsq, 0.0);
  EXPECT_EQ(grads[4].zeros, params[4].numel());

  // Weights before, the update after, through whichever backend holds each layer.
  std::vector<torch::Tensor> before;
  for (const auto& p : params) before.push_back(p.detach().to(torch::kDouble).clone());
  reducer.enqueue_weights(/*for_update=*/true);
  reducer.collect_weights();
  {
    torch::NoGradGuard no_grad;
    for (auto& p : params) p.mul_(1.01);
  }
  reducer.reduce_updates();
  for (size_t i = 0; i < params.size(); ++i) {
    SCOPED_TRACE("layer " + std::to_string(i));
    const auto after = params[i].detach().to(torch::kDouble);
    EXPECT_TRUE(close_rel(std::sqrt(reducer.param_sumsq()[i]), reference_norm(before[i]), 1e-6));
    // bf16 rounds the scaled weights: the reference is what W became, not 1% of W.
    EXPECT_TRUE(close_rel(std::sqrt(reducer.update_sumsq()[i]), reference_norm(after - before[i]), 1e-5));
  }
  // The next step's weight norm is the one the update pass read.
  reducer.reuse_snapshot();
  for (size_t i = 0; i < params.size(); ++i) {
    const double expected = reference_norm(params[i].detach());
    EXPECT_TRUE(close_rel(std::sqrt(reducer.param_sumsq()[i]), expected, 1e-6)) << "layer " << i;
  }
}

// Gradients measured on the host leave no device pass to fold a verdict from. This cannot tell
// the host-gradient check from the one-device check (either refuses here); a step with both
// host and device layers needs a GPU (keel_cuda_probe_tests).
TEST(LayerReducer, RefusesAVerdictWhenNoDevicePassHoldsTheGradients) {
  auto params = fp32_layers(5);
  LayerReducer reducer(params, /*measure_in_backward=*/true);
  reducer.enqueue_grads(1.0f);
  keel::probe::VerdictRequest verdict;
  EXPECT_THROW(reducer.finish_grads(&verdict), std::logic_error);
  EXPECT_THROW(reducer.found_inf(), std::logic_error);
}

}  // namespace
