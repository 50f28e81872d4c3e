// Unused parameters (issue 12): a parameter that requires grad but that a step's forward pass
// did not use gets no gradient from that backward. Its gradient then is either none (zero_grad
// set it to none) or one left from an earlier step (zero_grad kept it as zeros, or gradients
// accumulate); either way, grad_norm 0 and zero_frac 1 would read as total underflow. The
// record lists such layers as unused.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "keel/probe/probe.hpp"
#include "quiet_options.hpp"

namespace {

using keel::test::quiet;

// A trunk always used, and a branch used only when asked (a skipped auxiliary head, an
// expert no token was routed to).
struct BranchedImpl : torch::nn::Module {
  BranchedImpl() {
    trunk = register_module("trunk", torch::nn::Linear(5, 4));
    branch = register_module("branch", torch::nn::Linear(4, 4));
  }
  torch::Tensor forward(const torch::Tensor& x, bool use_branch) {
    torch::Tensor h = torch::tanh(trunk->forward(x));
    return use_branch ? branch->forward(h) : h;
  }
  torch::nn::Linear trunk{nullptr}, branch{nullptr};
};
TORCH_MODULE(Branched);

void backward(Branched& net, bool use_branch) { net->forward(torch::randn({3, 5}), use_branch).pow(2).mean().backward(); }

std::vector<std::string> unused_names(const keel::probe::Probe& probe) {
  std::vector<std::string> out;
  for (uint32_t layer : probe.last_record().unused_layers) out.push_back(probe.description().layers.at(layer).name);
  return out;
}

const std::vector<std::string> kBranch{"branch.weight", "branch.bias"};

// No gradient at all: never used since attach, its gradient is none.
TEST(UnusedLayers, ALayerWithNoGradientIsListedAsUnused) {
  torch::manual_seed(0);
  Branched net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.01));
  keel::probe::Probe probe(*net, opt, quiet());
  backward(net, /*use_branch=*/false);
  probe.step(torch::tensor(1.0));
  EXPECT_EQ(unused_names(probe), kBranch);
  EXPECT_TRUE(probe.last_record().frozen_layers.empty());
}

// A gradient left from an earlier step: the branch's gradient is still there (defined, not
// this step's) when it sits a step out, whether zero_grad zeroed it or nothing cleared it.
TEST(UnusedLayers, ALayerWhoseGradientIsLeftFromAnEarlierStepIsListedAsUnused) {
  torch::manual_seed(0);
  Branched net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.01));
  keel::probe::Probe probe(*net, opt, quiet());
  backward(net, /*use_branch=*/true);
  probe.step(torch::tensor(1.0));
  EXPECT_TRUE(unused_names(probe).empty()) << "every layer was used";

  // Zeroed, not set to none (libtorch 1.13's zero_grad()).
  for (auto& p : net->parameters()) p.mutable_grad().zero_();
  backward(net, /*use_branch=*/false);
  ASSERT_TRUE(net->branch->weight.grad().defined());
  probe.step(torch::tensor(1.0));
  EXPECT_EQ(unused_names(probe), kBranch);

  // Not cleared at all (gradients accumulated across steps): still not this step's.
  backward(net, /*use_branch=*/true);
  probe.step(torch::tensor(1.0));
  backward(net, /*use_branch=*/false);
  probe.step(torch::tensor(1.0));
  EXPECT_EQ(unused_names(probe), kBranch);
  EXPECT_GT(probe.last_record().layer_value(keel::wire::LayerMetric::kGradNorm, 2), 0.0f)
      << "the gradient left over is still measured (the optimizer steps with it)";

  backward(net, /*use_branch=*/true);
  probe.step(torch::tensor(1.0));
  EXPECT_TRUE(unused_names(probe).empty()) << "used again";
}

// Gradients written by hand, not by autograd: no hook ran for any layer, and no layer is
// called unused for it.
TEST(UnusedLayers, GradientsSetByHandAreNotCalledUnused) {
  torch::manual_seed(0);
  Branched net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.01));
  keel::probe::Probe probe(*net, opt, quiet());
  for (auto& p : net->parameters()) p.mutable_grad() = torch::ones_like(p);
  probe.step(torch::tensor(1.0));
  EXPECT_TRUE(unused_names(probe).empty());
}

// A frozen layer is frozen, not unused, though it has no gradient either.
TEST(UnusedLayers, AFrozenLayerIsFrozenNotUnused) {
  torch::manual_seed(0);
  Branched net;
  net->branch->bias.set_requires_grad(false);
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.01));
  keel::probe::Probe probe(*net, opt, quiet());
  backward(net, /*use_branch=*/false);
  probe.step(torch::tensor(1.0));
  EXPECT_EQ(unused_names(probe), std::vector<std::string>{"branch.weight"});
  ASSERT_EQ(probe.last_record().frozen_layers.size(), 1u);
  EXPECT_EQ(probe.description().layers.at(probe.last_record().frozen_layers[0]).name, "branch.bias");
}

TEST(UnusedLayers, AStepWithoutAGradientPassStillListsThemFromTheParameters) {
  // No gradient metric due and no policy that reads gradients: the gradient pass, which
  // otherwise notes each layer's state on its way, does not run this step.
  torch::manual_seed(0);
  Branched net;
  net->branch->bias.set_requires_grad(false);
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.01));
  keel::probe::ProbeOptions options = quiet();
  options.skip_on_nonfinite = false;
  for (int m = 0; m < keel::wire::kLayerMetricCount; ++m) {
    if ((keel::wire::kGradientMetrics >> m) & 1u) options.cadence[m] = 0;
  }
  keel::probe::Probe probe(*net, opt, options);
  backward(net, /*use_branch=*/false);
  probe.step(torch::tensor(1.0));
  EXPECT_EQ(probe.last_record().metric_mask & keel::wire::kGradientMetrics, 0u);
  EXPECT_EQ(unused_names(probe), std::vector<std::string>{"branch.weight"});
  ASSERT_EQ(probe.last_record().frozen_layers.size(), 1u);
  EXPECT_EQ(probe.description().layers.at(probe.last_record().frozen_layers[0]).name, "branch.bias");
}

}  // namespace
