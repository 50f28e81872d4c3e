// Frozen parameters (issue 12, item 3): a layer frozen at attach and unfrozen later, or the
// other way round, must neither crash the probe nor touch the user's own hooks, and its
// gradient arrivals count once it trains.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "keel/probe/probe.hpp"
#include "quiet_options.hpp"
#include "two_layer_net.hpp"

namespace {

using keel::test::backward;
using keel::test::TwoLayer;

using keel::test::quiet;

// The user's hook sits at position 0 of fc1.weight's hook list. fc1 is frozen when the probe
// attaches (no hook of keel's there) and unfrozen while it runs: ending the probe used to
// remove "its" hook 0, the user's.
TEST(FrozenLayers, UnfreezingAfterAttachLeavesTheUsersHooksAlone) {
  torch::manual_seed(0);
  TwoLayer net;
  int user_hook_calls = 0;
  net->fc1->weight.register_hook([&user_hook_calls](const torch::Tensor&) { ++user_hook_calls; });
  net->fc1->weight.set_requires_grad(false);
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.01));
  {
    keel::probe::Probe probe(*net, opt, quiet());
    backward(net, opt);
    probe.step(torch::tensor(1.0));
    net->fc1->weight.set_requires_grad(true);
    backward(net, opt);
    probe.step(torch::tensor(1.0));
    backward(net, opt);
    probe.step(torch::tensor(1.0));
  }
  const int before = user_hook_calls;
  backward(net, opt);
  EXPECT_EQ(user_hook_calls, before + 1) << "the user's hook survives the probe";
}
}  // namespace

namespace {

// A frozen layer is listed as frozen in the step record (its gradient metrics hold 0 there but
// mean "not measured"), from the step it is frozen to the step it trains again.
TEST(FrozenLayers, TheRecordListsTheLayersFrozenAtEachStep) {
  torch::manual_seed(0);
  TwoLayer net;
  net->fc1->bias.set_requires_grad(false);
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.01));
  keel::probe::Probe probe(*net, opt, quiet());
  const auto& names = probe.description().layers;
  auto frozen_names = [&] {
    std::vector<std::string> out;
    for (uint32_t layer : probe.last_record().frozen_layers) out.push_back(names.at(layer).name);
    return out;
  };
  backward(net, opt);
  probe.step(torch::tensor(1.0));
  EXPECT_EQ(frozen_names(), std::vector<std::string>{"fc1.bias"});

  net->fc1->bias.set_requires_grad(true);
  net->fc2->weight.set_requires_grad(false);
  backward(net, opt);
  probe.step(torch::tensor(1.0));
  EXPECT_EQ(frozen_names(), std::vector<std::string>{"fc2.weight"});
  EXPECT_GT(probe.last_record().layer_value(keel::wire::LayerMetric::kGradNorm, 1), 0.0f) << "fc1.bias trains again";
}

}  // namespace
