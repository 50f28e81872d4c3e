// Parameters the optimizer steps that the model does not have (issue 12, item 5): a learned
// temperature kept outside the module, say. They were never watched: a loss scaler's scale
// stayed in their gradients when the optimizer stepped them, and their NaNs never skipped a
// step. They are layers now, named after their place in the optimizer.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>
#include <vector>

#include "keel/probe/grad_scaler.hpp"
#include "keel/probe/probe.hpp"
#include "quiet_options.hpp"
#include "reference_stats.hpp"
#include "two_layer_net.hpp"

namespace {

using keel::test::TwoLayer;
using keel::wire::LayerMetric;

using keel::test::quiet;

struct OptimizerOnlyParamRig {
  OptimizerOnlyParamRig()
      : temperature(torch::ones({3}).requires_grad_(true)), opt(params(), torch::optim::SGDOptions(0.1)) {}
  std::vector<torch::Tensor> params() {
    auto p = net->parameters();
    p.push_back(temperature);
    return p;
  }
  void backward(int64_t seed, double scale = 1.0) {
    torch::manual_seed(seed);
    opt.zero_grad();
    ((net->forward(torch::randn({4, 5})) * temperature).pow(2).mean() * scale).backward();
  }
  TwoLayer net;
  torch::Tensor temperature;
  torch::optim::SGD opt;
};

TEST(OptimizerParams, AParameterOnlyTheOptimizerHasIsALayer) {
  torch::manual_seed(0);
  OptimizerOnlyParamRig rig;
  keel::probe::Probe probe(*rig.net, rig.opt, quiet());
  const auto& layers = probe.description().layers;
  ASSERT_EQ(layers.size(), 5u);
  EXPECT_EQ(layers[4].name, "optimizer.param_groups.0.params.4");
  rig.backward(1);
  const double expected = keel::test::reference_norm(rig.temperature.grad());
  probe.step(torch::tensor(1.0));
  EXPECT_TRUE(keel::test::close_rel(probe.last_record().layer_value(LayerMetric::kGradNorm, 4), expected, 1e-6));
}

TEST(OptimizerParams, ItsNonFiniteGradientSkipsTheStep) {
  torch::manual_seed(0);
  OptimizerOnlyParamRig rig;
  keel::probe::Probe probe(*rig.net, rig.opt, quiet());
  rig.backward(1);
  rig.temperature.mutable_grad()[1] = std::numeric_limits<float>::quiet_NaN();
  const auto before = rig.temperature.detach().clone();
  const auto outcome = probe.step(torch::tensor(1.0));
  EXPECT_FALSE(outcome.applied);
  EXPECT_EQ(outcome.skip_reason, "nonfinite");
  EXPECT_TRUE(torch::equal(rig.temperature, before));
}

TEST(OptimizerParams, ItsGradientIsUnscaledBeforeTheOptimizerStepsIt) {
  torch::manual_seed(0);
  OptimizerOnlyParamRig rig;
  keel::probe::Probe probe(*rig.net, rig.opt, quiet());
  keel::probe::GradScalerOptions so;
  so.init_scale = 1024;
  keel::probe::GradScaler scaler(so);
  probe.use_scaler(&scaler);
  rig.backward(7);
  const auto expected = rig.temperature.grad().clone();
  rig.backward(7, scaler.scale_value());
  EXPECT_TRUE(probe.step(torch::tensor(1.0)).applied);
  EXPECT_TRUE(torch::allclose(rig.temperature.grad(), expected, 1e-5, 1e-7));
}

// The record's lr is group 0's; with several groups, each group's lr goes with it.
// Not 1e-3 for a group: in libtorch after 2.11 (2.15 has it), a group's option equal to its
// options constructor's own default (SGD's lr, 1e-3 as in Python) counts as unset and is
// replaced by the optimizer's default.
TEST(OptimizerParams, EachParamGroupsLrIsReported) {
  torch::manual_seed(0);
  TwoLayer net;
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(net->fc1->parameters(), std::make_unique<torch::optim::SGDOptions>(1e-2));
  groups.emplace_back(net->fc2->parameters(), std::make_unique<torch::optim::SGDOptions>(2e-3));
  torch::optim::SGD opt(std::move(groups), torch::optim::SGDOptions(5e-2));
  keel::probe::Probe probe(*net, opt, quiet());
  opt.zero_grad();
  net->forward(torch::randn({4, 5})).pow(2).mean().backward();
  probe.step(torch::tensor(1.0));
  EXPECT_EQ(probe.description().layers.size(), 4u) << "every optimizer tensor is the model's";
  EXPECT_DOUBLE_EQ(probe.last_record().lr, 1e-2);
  EXPECT_EQ(probe.last_record().group_lrs, (std::vector<double>{1e-2, 2e-3}));

  torch::optim::SGD single(net->parameters(), torch::optim::SGDOptions(0.1));
  keel::probe::Probe one_group(*net, single, quiet());
  single.zero_grad();
  net->forward(torch::randn({4, 5})).pow(2).mean().backward();
  one_group.step(torch::tensor(1.0));
  EXPECT_TRUE(one_group.last_record().group_lrs.empty());
}

}  // namespace
