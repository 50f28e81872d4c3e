// AccumulationStats: gradients measured as autograd accumulates them. What the pass takes from
// the hooks must be what the pass would have measured itself, bit for bit, and only while
// nothing has written the gradient or the weight since.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "keel/probe/fused_reduce.hpp"
#include "reduce/accumulation_stats.hpp"
#include "reduce/cpu_fused_reductions.hpp"

namespace {

using keel::probe::AccumulationStats;
using keel::probe::ConstSpan;
using keel::probe::FusedReducer;
using keel::probe::GradStats;

// Linear layers in a row; the last one is `wide` inputs wide, to make a large weight.
struct Net {
  explicit Net(int64_t wide = 8) {
    torch::manual_seed(0);
    layers.emplace_back(8, 8);
    layers.emplace_back(8, 8);
    layers.emplace_back(wide, 8);
    for (auto& layer : layers) {
      params.push_back(layer->weight);
      params.push_back(layer->bias);
    }
  }
  void backward() {
    for (auto& p : params) p.mutable_grad() = torch::Tensor();
    torch::Tensor x = torch::randn({4, 8});
    x = layers[1]->forward(layers[0]->forward(x));
    if (layers[2]->weight.size(1) != 8) x = x.repeat({1, layers[2]->weight.size(1) / 8});
    layers[2]->forward(x).pow(2).sum().backward();
  }
  std::vector<torch::nn::Linear> layers;
  std::vector<torch::Tensor> params;
};

GradStats pass_grad_stats(const torch::Tensor& g) {
  FusedReducer reducer;
  std::vector<GradStats> out;
  reducer.grad_stats({ConstSpan{g.data_ptr<float>(), g.numel()}}, out);
  return out[0];
}

double pass_sumsq(const torch::Tensor& w) {
  FusedReducer reducer;
  std::vector<double> out;
  reducer.sumsq({ConstSpan{w.data_ptr<float>(), w.numel()}}, out);
  return out[0];
}

// A parameter whose data a wrapper swaps (FSDP's flat parameter, BackwardOrder's test of the
// same): not hooked, so backward takes the whole parameter's gradient, and the pass measures it.
TEST(AccumulationStats, AParameterWhoseDataAWrapperSwapsIsLeftToThePass) {
  auto gather_and_backward = [](torch::Tensor& flat) {
    {
      torch::NoGradGuard no_grad;
      flat.set_data(torch::ones({8}));
    }
    (flat * 2).sum().backward();
  };
  torch::Tensor flat = torch::zeros({4}, torch::TensorOptions().requires_grad(true));
  {
    AccumulationStats accumulated({flat}, /*hook=*/true, {true});
    ASSERT_NO_THROW(gather_and_backward(flat));
    GradStats stats;
    double weight_sumsq = 0;
    EXPECT_FALSE(accumulated.take(0, flat.grad(), false, stats, weight_sumsq)) << "nothing measured in backward";
  }
  torch::Tensor held = torch::zeros({4}, torch::TensorOptions().requires_grad(true));
  AccumulationStats accumulated({held}, /*hook=*/true);
  EXPECT_ANY_THROW(gather_and_backward(held)) << "hooked, the shard's accumulator refuses the whole gradient";
}

TEST(AccumulationStats, WhatTheHooksMeasuredIsWhatThePassMeasuresBitForBit) {
  Net net;
  AccumulationStats accumulated(net.params, /*hook=*/true);
  accumulated.set_weighs(true);
  for (int step = 0; step < 3; ++step) {
    net.backward();
    for (size_t i = 0; i < net.params.size(); ++i) {
      GradStats stats;
      double weight_sumsq = 0;
      ASSERT_TRUE(accumulated.take(i, net.params[i].grad(), /*with_weight=*/true, stats, weight_sumsq))
          << "step " << step << ", layer " << i;
      const GradStats expected = pass_grad_stats(net.params[i].grad());
      EXPECT_EQ(stats.sumsq, expected.sumsq);
      EXPECT_EQ(stats.absmax, expected.absmax);
      EXPECT_EQ(stats.nonfinite, expected.nonfinite);
      EXPECT_EQ(stats.zeros, expected.zeros);
      EXPECT_EQ(weight_sumsq, pass_sumsq(net.params[i]));
    }
    accumulated.next_step();
  }
}

TEST(AccumulationStats, AGradientWrittenAfterBackwardIsLeftToThePassFromThenOn) {
  Net net;
  AccumulationStats accumulated(net.params, /*hook=*/true);
  GradStats stats;
  double weight_sumsq = 0;
  net.backward();
  net.params[0].mutable_grad().mul_(0.5);   // clipping, as a user does between backward and step
  EXPECT_FALSE(accumulated.take(0, net.params[0].grad(), false, stats, weight_sumsq));
  EXPECT_TRUE(accumulated.take(1, net.params[1].grad(), false, stats, weight_sumsq));
  accumulated.next_step();
  net.backward();
  EXPECT_FALSE(accumulated.take(0, net.params[0].grad(), false, stats, weight_sumsq))
      << "overtaken once: measured by the pass from then on";
  EXPECT_TRUE(accumulated.take(1, net.params[1].grad(), false, stats, weight_sumsq));
}

TEST(AccumulationStats, AWeightWrittenAfterBackwardIsLeftToThePass) {
  Net net;
  AccumulationStats accumulated(net.params, /*hook=*/true);
  accumulated.set_weighs(true);
  net.backward();
  {
    torch::NoGradGuard no_grad;
    net.params[2].add_(1.0);
  }
  GradStats stats;
  double weight_sumsq = 0;
  EXPECT_FALSE(accumulated.take(2, net.params[2].grad(), /*with_weight=*/true, stats, weight_sumsq));
  EXPECT_TRUE(accumulated.take(3, net.params[3].grad(), /*with_weight=*/true, stats, weight_sumsq));
}

TEST(AccumulationStats, ElementsMovedWithoutAVersionBumpAreLeftToThePass) {
  // set_data (Python's `.data = `) swaps a tensor's storage in place and leaves its version as
  // it was: only where the elements are tells the hooks' results are not of these ones.
  Net net;
  AccumulationStats accumulated(net.params, /*hook=*/true);
  accumulated.set_weighs(true);
  net.backward();
  const uint32_t grad_version = net.params[0].grad()._version();
  net.params[0].mutable_grad().set_data(torch::full_like(net.params[0].grad(), 3.0f));
  ASSERT_EQ(net.params[0].grad()._version(), grad_version);
  const uint32_t weight_version = net.params[2]._version();
  net.params[2].set_data(torch::full_like(net.params[2], 2.0f));
  ASSERT_EQ(net.params[2]._version(), weight_version);
  GradStats stats;
  double weight_sumsq = 0;
  EXPECT_FALSE(accumulated.take(0, net.params[0].grad(), /*with_weight=*/false, stats, weight_sumsq));
  EXPECT_FALSE(accumulated.take(2, net.params[2].grad(), /*with_weight=*/true, stats, weight_sumsq));
  EXPECT_TRUE(accumulated.take(4, net.params[4].grad(), /*with_weight=*/true, stats, weight_sumsq));
}

TEST(AccumulationStats, NothingIsTakenThatTheStepsOwnBackwardDidNotMeasure) {
  Net net;
  AccumulationStats accumulated(net.params, /*hook=*/true);
  GradStats stats;
  double weight_sumsq = 0;
  net.backward();
  accumulated.next_step();
  // No backward this step: the gradients are the last step's, measured in its epoch.
  EXPECT_FALSE(accumulated.take(0, net.params[0].grad(), false, stats, weight_sumsq));
  // A weight the hooks were not told to weigh.
  net.backward();
  EXPECT_FALSE(accumulated.take(0, net.params[0].grad(), /*with_weight=*/true, stats, weight_sumsq));
  EXPECT_TRUE(accumulated.take(0, net.params[0].grad(), /*with_weight=*/false, stats, weight_sumsq));
}

TEST(AccumulationStats, ALargeGradientIsLeftToThePass) {
  Net net(/*wide=*/1 << 13);   // the last weight: 8 x 8192 = 65,536 elements, two chunks
  AccumulationStats accumulated(net.params, /*hook=*/true);
  net.backward();
  GradStats stats;
  double weight_sumsq = 0;
  EXPECT_FALSE(accumulated.take(4, net.params[4].grad(), false, stats, weight_sumsq));
  EXPECT_TRUE(accumulated.take(5, net.params[5].grad(), false, stats, weight_sumsq));
}

// The CPU backend takes the hooks' results: a write that bypasses the version counter (as no
// ATen op does) after backward goes unseen by the pass, which shows that the pass did not read
// the gradient. An unscale is a pass over the gradients whatever the hooks found.
TEST(AccumulationStats, TheCpuBackendTakesTheHooksResultsUnlessItUnscales) {
  Net net;
  keel::probe::CpuFusedReductions cpu(net.params, /*measure_in_backward=*/true);
  for (float unscale : {1.0f, 0.5f}) {
    SCOPED_TRACE(unscale);
    net.backward();
    const double measured = pass_grad_stats(net.params[0].grad()).sumsq;
    net.params[0].mutable_grad().data_ptr<float>()[0] += 100.0f;   // no version bump
    cpu.plan_update(/*grads_this_step=*/false);
    cpu.begin_grads(unscale);
    for (size_t i = 0; i < net.params.size(); ++i) ASSERT_TRUE(cpu.take_grad(i, net.params[i].grad()));
    cpu.enqueue_grads(unscale);
    keel::probe::LayerSums sums(net.params.size());
    cpu.collect_grads(sums);
    if (unscale == 1.0f) {
      EXPECT_EQ(sums.grads[0].sumsq, measured) << "taken from the hook";
    } else {
      // The pass unscaled the written gradient in place and measured it; the hook's result
      // (before the write, not unscaled) would differ.
      EXPECT_EQ(sums.grads[0].sumsq, pass_grad_stats(net.params[0].grad()).sumsq) << "measured by the pass";
    }
    cpu.end_step();
  }
}

// ProbeOptions::measure_in_backward off: no hook measures anything, and the pass reads every
// gradient itself (it sees the write the hooks' results would have hidden).
TEST(AccumulationStats, WithoutHooksThePassMeasuresEveryGradient) {
  Net net;
  AccumulationStats accumulated(net.params, /*hook=*/false);
  net.backward();
  GradStats stats;
  double weight_sumsq = 0;
  for (size_t i = 0; i < net.params.size(); ++i) {
    EXPECT_FALSE(accumulated.take(i, net.params[i].grad(), /*with_weight=*/false, stats, weight_sumsq)) << i;
  }
  keel::probe::CpuFusedReductions cpu(net.params, /*measure_in_backward=*/false);
  net.backward();
  net.params[0].mutable_grad().data_ptr<float>()[0] += 100.0f;   // no version bump
  cpu.plan_update(/*grads_this_step=*/false);
  cpu.begin_grads(1.0f);
  for (size_t i = 0; i < net.params.size(); ++i) ASSERT_TRUE(cpu.take_grad(i, net.params[i].grad()));
  cpu.enqueue_grads(1.0f);
  keel::probe::LayerSums sums(net.params.size());
  cpu.collect_grads(sums);
  EXPECT_EQ(sums.grads[0].sumsq, pass_grad_stats(net.params[0].grad()).sumsq);
}

}  // namespace
