// GradScaler against PyTorch's algorithm (torch.cuda.amp.GradScaler.update ->
// _amp_update_scale_), written out here independently in float32 as the reference.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>
#include <random>

#include "keel/probe/grad_scaler.hpp"

namespace {

struct ReferenceScaler {
  float scale;
  int32_t tracker = 0;
  void update(bool found_inf, float growth, float backoff, int32_t interval) {
    if (found_inf) {
      scale *= backoff;
      tracker = 0;
      return;
    }
    if (tracker + 1 == interval) {
      const float grown = scale * growth;
      if (std::isfinite(grown)) scale = grown;
      tracker = 0;
    } else {
      ++tracker;
    }
  }
};

// Drives the scaler through its public API on a real model; overflow comes from an Inf
// written into a gradient, as a real fp16 overflow would.
void run_step(torch::nn::Linear& net, torch::optim::SGD& opt, keel::probe::GradScaler& scaler, bool overflow) {
  opt.zero_grad();
  scaler.scale(net->forward(torch::ones({2, 3})).sum()).backward();
  if (overflow) {
    torch::NoGradGuard no_grad;
    net->weight.grad()[0][0] = std::numeric_limits<float>::infinity();
  }
  scaler.step(opt);
  scaler.update();
}

TEST(GradScaler, DefaultsArePyTorchs) {
  keel::probe::GradScaler scaler;
  EXPECT_EQ(scaler.scale_value(), 65536.0f);
  EXPECT_EQ(scaler.options().growth_factor, 2.0);
  EXPECT_EQ(scaler.options().backoff_factor, 0.5);
  EXPECT_EQ(scaler.options().growth_interval, 2000);
}

TEST(GradScaler, ScriptedTrajectory) {
  torch::nn::Linear net(3, 2);
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.01));
  keel::probe::GradScalerOptions options;
  options.growth_interval = 3;
  keel::probe::GradScaler scaler(options);
  // ok ok ok -> grow; inf -> back off; ok ok inf -> back off (tracker reset); ok ok ok -> grow
  const std::vector<bool> script{false, false, false, true, false, false, true, false, false, false};
  const std::vector<float> expected{65536, 65536, 131072, 65536, 65536, 65536, 32768, 32768, 32768, 65536};
  for (size_t i = 0; i < script.size(); ++i) {
    run_step(net, opt, scaler, script[i]);
    EXPECT_EQ(scaler.scale_value(), expected[i]) << "step " << i;
  }
  EXPECT_EQ(scaler.skipped_total(), 2);
}

TEST(GradScaler, RandomScriptMatchesReference) {
  torch::nn::Linear net(3, 2);
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.0));
  keel::probe::GradScalerOptions options;
  options.growth_interval = 2;
  keel::probe::GradScaler scaler(options);
  ReferenceScaler ref{65536.0f};
  std::mt19937 rng(7);
  for (int i = 0; i < 300; ++i) {
    const bool overflow = rng() % 5 == 0;
    run_step(net, opt, scaler, overflow);
    // A large scale also overflows the real gradients by itself: what the scaler found is the
    // truth the reference follows, and a scripted overflow must always be found.
    if (overflow) {
      ASSERT_TRUE(scaler.found_inf()) << "step " << i;
    }
    ref.update(scaler.found_inf(), 2.0f, 0.5f, 2);
    ASSERT_EQ(scaler.scale_value(), ref.scale) << "step " << i;
    ASSERT_EQ(scaler.growth_tracker(), ref.tracker) << "step " << i;
  }
}

TEST(GradScaler, GrowthStopsAtFloatMax) {
  keel::probe::GradScalerOptions options;
  options.init_scale = 1e38;
  options.growth_interval = 1;
  keel::probe::GradScaler scaler(options);
  ReferenceScaler ref{1e38f};
  for (int i = 0; i < 5; ++i) {
    scaler.mark_unscaled(false);
    scaler.update();
    ref.update(false, 2.0f, 0.5f, 1);
    ASSERT_TRUE(std::isfinite(scaler.scale_value()));
    ASSERT_EQ(scaler.scale_value(), ref.scale);
  }
  EXPECT_EQ(scaler.scale_value(), 2e38f);
}

TEST(GradScaler, UnscalesGradientsAndSkipsOverflowedUpdates) {
  torch::manual_seed(0);
  torch::nn::Linear net(3, 2);
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1));
  keel::probe::GradScaler scaler;
  opt.zero_grad();
  net->forward(torch::ones({2, 3})).sum().backward();
  const auto plain = net->weight.grad().clone();
  opt.zero_grad();
  scaler.scale(net->forward(torch::ones({2, 3})).sum()).backward();
  scaler.unscale_(opt);
  EXPECT_TRUE(torch::allclose(net->weight.grad(), plain));
  scaler.unscale_(opt);   // idempotent within a step
  EXPECT_TRUE(torch::allclose(net->weight.grad(), plain));

  const auto before = net->weight.detach().clone();
  {
    torch::NoGradGuard no_grad;
    net->bias.grad()[0] = std::numeric_limits<float>::quiet_NaN();
  }
  scaler.mark_unscaled(true);
  EXPECT_FALSE(scaler.step(opt));
  EXPECT_TRUE(torch::equal(net->weight, before));
}

}  // namespace
