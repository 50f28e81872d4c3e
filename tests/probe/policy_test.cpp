// Skip policy, first-non-finite events and the probe's loss-scaler path.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>

#include "keel/probe/probe.hpp"
#include "quiet_options.hpp"
#include "two_layer_net.hpp"

namespace {

using keel::test::bit_identical;
using keel::test::poison;
using keel::test::TwoLayer;

using keel::test::quiet;

torch::Tensor forward_backward(TwoLayer& net, torch::optim::Optimizer& opt, int64_t seed, double scale = 1.0) {
  torch::manual_seed(seed);
  opt.zero_grad();
  auto loss = net->forward(torch::randn({4, 5})).pow(2).mean();
  (loss * scale).backward();
  return loss.detach();
}

TEST(SkipPolicy, NonFiniteStepLeavesParametersAndOptimizerStateBitIdentical) {
  torch::manual_seed(0);
  TwoLayer net;
  torch::optim::AdamW opt(net->parameters(), torch::optim::AdamWOptions(1e-2));
  keel::probe::Probe probe(*net, opt, quiet());
  for (int s = 0; s < 3; ++s) {
    forward_backward(net, opt, s);
    ASSERT_TRUE(probe.step(torch::tensor(1.0)).applied);
  }
  const auto state = keel::test::params_and_adamw_state(*net, opt);

  forward_backward(net, opt, 10);
  poison(net->fc1->weight);
  const auto outcome = probe.step(torch::tensor(1.0));
  EXPECT_FALSE(outcome.applied);
  EXPECT_EQ(outcome.skip_reason, "nonfinite");
  EXPECT_TRUE(probe.last_record().skipped);
  EXPECT_EQ(probe.last_record().skip_reason, "nonfinite");

  const auto after = keel::test::params_and_adamw_state(*net, opt);
  ASSERT_EQ(after.size(), state.size());
  for (size_t k = 0; k < state.size(); ++k) EXPECT_TRUE(bit_identical(after[k], state[k])) << k;
  // update_ratio is 0 for every layer on a skipped step.
  for (uint32_t l = 0; l < probe.last_record().layer_count; ++l) {
    EXPECT_EQ(probe.last_record().layer_value(keel::wire::LayerMetric::kUpdateRatio, l), 0.0f);
  }

  // The next clean step is applied again.
  forward_backward(net, opt, 11);
  EXPECT_TRUE(probe.step(torch::tensor(1.0)).applied);
}

TEST(SkipPolicy, CanBeTurnedOff) {
  TwoLayer net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1));
  auto options = quiet();
  options.skip_on_nonfinite = false;
  keel::probe::Probe probe(*net, opt, options);
  forward_backward(net, opt, 1);
  poison(net->fc2->bias);
  EXPECT_TRUE(probe.step(torch::tensor(1.0)).applied);
  EXPECT_TRUE(std::isnan(net->fc2->bias[0].item<float>()));
}

TEST(FirstNonFinite, NamesTheFirstLayerInBackwardOrderAndTheStep) {
  TwoLayer net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1));
  keel::probe::Probe probe(*net, opt, quiet());
  for (int64_t s = 0; s < 3; ++s) {
    forward_backward(net, opt, s);
    probe.step(torch::tensor(1.0));
    EXPECT_TRUE(probe.last_events().empty());
  }
  // Both fc1 and fc2 are poisoned; backward reaches fc2 first, model order has fc1 first.
  forward_backward(net, opt, 3);
  poison(net->fc1->weight);
  poison(net->fc2->weight);
  probe.step(torch::tensor(1.0));
  const auto& events = probe.last_events();
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events[0].kind, "first_nonfinite");
  EXPECT_EQ(events[0].layer, "fc2.weight");
  EXPECT_EQ(events[0].step, 3);
  EXPECT_EQ(events.back().kind, "skip");
  EXPECT_EQ(events.back().step, 3);

  // A second non-finite step in a row is the same episode: a skip, no new first_nonfinite.
  forward_backward(net, opt, 4);
  poison(net->fc1->bias);
  probe.step(torch::tensor(1.0));
  ASSERT_EQ(probe.last_events().size(), 1u);
  EXPECT_EQ(probe.last_events()[0].kind, "skip");

  // After a clean step a new episode is reported again, with its own layer.
  forward_backward(net, opt, 5);
  probe.step(torch::tensor(1.0));
  forward_backward(net, opt, 6);
  poison(net->fc1->bias);
  probe.step(torch::tensor(1.0));
  ASSERT_FALSE(probe.last_events().empty());
  EXPECT_EQ(probe.last_events()[0].layer, "fc1.bias");
  EXPECT_EQ(probe.last_events()[0].step, 6);
}

TEST(FirstNonFinite, WatchedTensorEvent) {
  TwoLayer net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1));
  keel::probe::Probe probe(*net, opt, quiet());
  forward_backward(net, opt, 0);
  probe.watch("hidden", torch::ones({2, 3}));
  auto bad = torch::ones({2, 3});
  bad[1][2] = std::numeric_limits<float>::infinity();
  probe.watch("logits", bad);
  probe.step(torch::tensor(1.0));
  ASSERT_EQ(probe.last_events().size(), 1u);
  EXPECT_EQ(probe.last_events()[0].kind, "first_nonfinite_watch");
  EXPECT_EQ(probe.last_events()[0].layer, "logits");
  EXPECT_EQ(probe.last_record().watches[1].nonfinite, 1);
  EXPECT_TRUE(probe.last_record().watches[1].absmax == std::numeric_limits<float>::infinity());
}

TEST(ProbeScaler, UnscalesInItsPassSkipsOnOverflowAndReportsState) {
  torch::manual_seed(0);
  TwoLayer net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1));
  keel::probe::Probe probe(*net, opt, quiet());
  keel::probe::GradScalerOptions so;
  so.init_scale = 1024;
  so.growth_interval = 2;
  keel::probe::GradScaler scaler(so);
  probe.use_scaler(&scaler);

  // Reference gradient without scaling.
  forward_backward(net, opt, 42);
  const auto expected = net->fc1->weight.grad().clone();
  forward_backward(net, opt, 42, scaler.scale_value());
  probe.step(torch::tensor(1.0));
  EXPECT_TRUE(torch::allclose(net->fc1->weight.grad(), expected, 1e-6, 1e-7));
  ASSERT_TRUE(probe.last_record().scaler.has_value());
  EXPECT_EQ(probe.last_record().scaler->scale, 1024.0);
  EXPECT_EQ(probe.last_record().scaler->growth_tracker, 1);

  forward_backward(net, opt, 43, scaler.scale_value());
  probe.step(torch::tensor(1.0));
  EXPECT_EQ(probe.last_record().scaler->scale, 2048.0);   // grown after 2 clean steps

  forward_backward(net, opt, 44, scaler.scale_value());
  poison(net->fc2->bias);
  const auto before = net->fc1->weight.detach().clone();
  const auto outcome = probe.step(torch::tensor(1.0));
  EXPECT_FALSE(outcome.applied);
  EXPECT_EQ(outcome.skip_reason, "scaler");
  EXPECT_TRUE(torch::equal(net->fc1->weight, before));
  EXPECT_EQ(probe.last_record().scaler->scale, 1024.0);   // backed off
  EXPECT_TRUE(probe.last_record().scaler->found_inf);
  EXPECT_EQ(probe.last_record().scaler->skipped_total, 1);
}

// Issue 12, item 6: a scale of exactly 1.0 (reached by backing off) still gets its step's
// overflow check. "Unscale by 1" used to read as "nothing to unscale", and the step reused the
// last overflow's found_inf: every step after it was skipped as "scaler" whatever its gradients.
TEST(ProbeScaler, AScaleOfExactlyOneStillChecksEachStep) {
  torch::manual_seed(0);
  TwoLayer net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1));
  keel::probe::Probe probe(*net, opt, quiet());
  keel::probe::GradScalerOptions so;
  so.init_scale = 2.0;
  keel::probe::GradScaler scaler(so);
  probe.use_scaler(&scaler);

  forward_backward(net, opt, 50, scaler.scale_value());
  poison(net->fc2->bias);
  auto outcome = probe.step(torch::tensor(1.0));
  EXPECT_EQ(outcome.skip_reason, "scaler");
  ASSERT_EQ(scaler.scale_value(), 1.0f);

  for (int64_t seed = 51; seed < 54; ++seed) {
    forward_backward(net, opt, seed, scaler.scale_value());
    const auto before = net->fc1->weight.detach().clone();
    outcome = probe.step(torch::tensor(1.0));
    EXPECT_TRUE(outcome.applied) << "seed " << seed << ": " << outcome.skip_reason;
    EXPECT_FALSE(torch::equal(net->fc1->weight, before)) << "seed " << seed;
    EXPECT_FALSE(probe.last_record().scaler->found_inf);
  }
  // And an overflow at scale 1 is still found.
  forward_backward(net, opt, 60, scaler.scale_value());
  poison(net->fc1->weight);
  EXPECT_EQ(probe.step(torch::tensor(1.0)).skip_reason, "scaler");
}

}  // namespace
