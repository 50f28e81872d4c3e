// BackwardOrder: the arrival order of a step's gradients, from hooks on the parameters'
// gradient accumulators. A parameter holds its accumulator only weakly, and a step's graph
// lets it go when backward ends: these tests fail when the hooks go with it.
#include <gtest/gtest.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/torch.h>

#include <algorithm>
#include <vector>

#include "layout/backward_order.hpp"

namespace {

using keel::probe::BackwardOrder;

// Three Linear(4, 4) in a row: backward reaches the last one's parameters first.
struct Chain {
  Chain() {
    torch::manual_seed(0);
    for (int i = 0; i < 3; ++i) layers.emplace_back(4, 4);
    for (auto& layer : layers) {
      params.push_back(layer->weight);
      params.push_back(layer->bias);
    }
  }
  void backward() {
    torch::Tensor x = torch::randn({2, 4});
    for (auto& layer : layers) x = layer->forward(x);
    x.pow(2).sum().backward();
  }
  std::vector<torch::nn::Linear> layers;
  std::vector<torch::Tensor> params;
};

TEST(BackwardOrder, EveryStepsArrivalsAreRecordedAfterTheGraphsThatHeldTheAccumulatorsAreGone) {
  Chain chain;
  BackwardOrder order(chain.params);
  for (int step = 0; step < 3; ++step) {
    chain.backward();
    std::vector<int64_t> positions;
    for (size_t i = 0; i < chain.params.size(); ++i) positions.push_back(order.position(i));
    std::vector<int64_t> sorted = positions;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, (std::vector<int64_t>{0, 1, 2, 3, 4, 5})) << "step " << step;
    // The last layer (params 4 and 5) arrives before the first (params 0 and 1).
    EXPECT_LT(std::max(positions[4], positions[5]), std::min(positions[0], positions[1])) << "step " << step;
    for (size_t i = 0; i < chain.params.size(); ++i) EXPECT_FALSE(order.passed_by(i)) << "step " << step;
    order.rearm();
    for (size_t i = 0; i < chain.params.size(); ++i) EXPECT_EQ(order.position(i), -1);
  }
}

// FSDP's flat parameter: a shard between steps, its data swapped for the whole parameter
// before forward (set_data, same type and device: autograd keeps the accumulator it has). An
// accumulator held since it was a shard expects a shard's gradient, and backward fails on the
// whole one; marked swapped, the parameter is not hooked and its gradient is taken as autograd
// gives it.
TEST(BackwardOrder, AParameterWhoseDataAWrapperSwapsIsNotHooked) {
  auto flat_parameter = [] { return torch::zeros({4}, torch::TensorOptions().requires_grad(true)); };
  auto gather_and_backward = [](torch::Tensor& flat) {
    {
      torch::NoGradGuard no_grad;
      flat.set_data(torch::ones({8}));
    }
    (flat * 2).sum().backward();
  };
  {
    torch::Tensor flat = flat_parameter();
    BackwardOrder order({flat}, {true});
    ASSERT_NO_THROW(gather_and_backward(flat));
    EXPECT_EQ(flat.grad().numel(), 8);
    EXPECT_EQ(order.position(0), -1) << "not hooked: no arrival recorded";
  }
  torch::Tensor flat = flat_parameter();
  BackwardOrder order({flat});
  EXPECT_ANY_THROW(gather_and_backward(flat)) << "held, the shard's accumulator refuses the whole gradient";
}

TEST(BackwardOrder, SeveralBackwardPassesInAStepKeepTheFirstArrival) {
  Chain chain;
  BackwardOrder order(chain.params);
  chain.backward();
  const int64_t first = order.position(0);
  chain.backward();
  EXPECT_EQ(order.position(0), first);
}

TEST(BackwardOrder, AParameterUnfrozenAfterTrackingIsFollowedFromTheNextRearm) {
  Chain chain;
  chain.params[0].set_requires_grad(false);
  BackwardOrder order(chain.params);
  chain.backward();
  EXPECT_EQ(order.position(0), -1);
  EXPECT_FALSE(order.passed_by(0)) << "a frozen layer is not hooked, so not passed by";
  chain.params[0].set_requires_grad(true);
  order.rearm();
  chain.backward();
  EXPECT_GE(order.position(0), 0);
}

TEST(BackwardOrder, ALayerTheBackwardDidNotReachIsPassedBy) {
  Chain chain;
  BackwardOrder order(chain.params);
  // Only the last layer is in this graph.
  chain.layers[2]->forward(torch::randn({2, 4})).sum().backward();
  EXPECT_TRUE(order.passed_by(0));
  EXPECT_FALSE(order.passed_by(4));
}

TEST(BackwardOrder, ItsHooksLeaveTheAccumulatorsWithIt) {
  Chain chain;
  // Held here too, so that the accumulators the order hooked are the ones looked at after.
  std::vector<decltype(torch::autograd::impl::grad_accumulator(chain.params[0]))> accumulators;
  for (const auto& p : chain.params) accumulators.push_back(torch::autograd::impl::grad_accumulator(p));
  {
    BackwardOrder order(chain.params);
    for (const auto& a : accumulators) EXPECT_EQ(a->post_hooks().size(), 1u);
    order.track(chain.params);   // a new layout of the same tensors: hooked once, not twice
    for (const auto& a : accumulators) EXPECT_EQ(a->post_hooks().size(), 1u);
  }
  for (const auto& a : accumulators) EXPECT_TRUE(a->post_hooks().empty());
}

}  // namespace
