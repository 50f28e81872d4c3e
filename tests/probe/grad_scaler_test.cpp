// GradScaler against PyTorch's algorithm (torch.cuda.amp.GradScaler.update ->
// _amp_update_scale_), written out here independently as the reference, and, where libtorch
// has its CPU kernel (2.x), against ATen's _amp_update_scale_ itself.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <limits>
#include <random>
#include <stdexcept>

#include "keel/probe/grad_scaler.hpp"

namespace {

// The float32 scale times the double factor in double, rounded to float32, as ATen's kernel.
struct ReferenceScaler {
  float scale;
  int32_t tracker = 0;
  void update(bool found_inf, double growth, double backoff, int32_t interval) {
    if (found_inf) {
      scale = static_cast<float>(scale * backoff);
      tracker = 0;
      return;
    }
    if (tracker + 1 == interval) {
      const float grown = static_cast<float>(scale * growth);
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
    ref.update(scaler.found_inf(), 2.0, 0.5, 2);
    ASSERT_EQ(scaler.scale_value(), ref.scale) << "step " << i;
    ASSERT_EQ(scaler.growth_tracker(), ref.tracker) << "step " << i;
  }
}

// Factors other than 2 and 0.5 round: the host's update() must round as the device's does,
// or a scale settled from a deferred step and one updated on the host drift apart.
TEST(GradScaler, UnevenFactorsRoundAsAtensUpdate) {
#if TORCH_VERSION_MAJOR < 2
  GTEST_SKIP() << "libtorch 1.x has no CPU kernel for _amp_update_scale_";
#else
  keel::probe::GradScalerOptions options;
  options.init_scale = 3.1;
  options.growth_factor = 1.7;
  options.backoff_factor = 0.3;
  options.growth_interval = 1;
  keel::probe::GradScaler scaler(options);
  auto scale = torch::full({1}, static_cast<float>(options.init_scale));
  auto tracker = torch::zeros({1}, torch::kInt);
  std::mt19937 rng(11);
  for (int i = 0; i < 200; ++i) {
    const bool overflow = rng() % 3 == 0;
    scaler.mark_unscaled(overflow);
    scaler.update();
    at::_amp_update_scale_(scale, tracker, torch::full({1}, overflow ? 1.0f : 0.0f), options.growth_factor,
                           options.backoff_factor, options.growth_interval);
    ASSERT_EQ(scaler.scale_value(), scale.item<float>()) << "step " << i;
    ASSERT_EQ(scaler.growth_tracker(), tracker.item<int32_t>()) << "step " << i;
  }
#endif
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
    ref.update(false, 2.0, 0.5, 1);
    ASSERT_TRUE(std::isfinite(scaler.scale_value()));
    ASSERT_EQ(scaler.scale_value(), ref.scale);
  }
  EXPECT_EQ(scaler.scale_value(), 2e38f);
}

// A state loaded from another scaler (the Python front's torch.amp.GradScaler) is where the
// next update starts from: its scale and its count of clean steps.
TEST(GradScaler, ALoadedStateIsWhereTheNextUpdateStarts) {
  keel::probe::GradScalerOptions options;
  options.growth_interval = 3;
  keel::probe::GradScaler scaler(options);
  scaler.load_state(1024.0f, 2);
  EXPECT_EQ(scaler.scale_value(), 1024.0f);
  EXPECT_EQ(scaler.growth_tracker(), 2);
  scaler.mark_unscaled(false);
  scaler.update();   // the third clean step in a row: the scale grows
  EXPECT_EQ(scaler.scale_value(), 2048.0f);
  EXPECT_EQ(scaler.growth_tracker(), 0);
  scaler.load_state(8.0f, 1);
  scaler.mark_unscaled(true);
  scaler.update();
  EXPECT_EQ(scaler.scale_value(), 4.0f);
  EXPECT_EQ(scaler.growth_tracker(), 0);
}

// Another scaler's tensors (the Python front shares a torch.amp.GradScaler's): every update
// lands in them, seen by that scaler as writes (their version counters), with no load back.
TEST(GradScaler, ASharedStateIsWhereEveryUpdateGoes) {
  keel::probe::GradScalerOptions options;
  options.growth_interval = 2;
  keel::probe::GradScaler scaler(options);
  const torch::Tensor scale = torch::full({1}, 1024.0, torch::TensorOptions().dtype(torch::kFloat));
  const torch::Tensor tracker = torch::full({1}, 1, torch::TensorOptions().dtype(torch::kInt));
  scaler.share_state(scale, tracker, 1024.0f, 1);
  EXPECT_EQ(scaler.scale_value(), 1024.0f);
  EXPECT_EQ(scaler.growth_tracker(), 1);
  const auto version = scale.unsafeGetTensorImpl()->version_counter().current_version();
  scaler.mark_unscaled(false);
  scaler.update();   // the second clean step in a row: the scale grows
  EXPECT_EQ(scale.item<float>(), 2048.0f);
  EXPECT_EQ(tracker.item<int32_t>(), 0);
  EXPECT_GT(scale.unsafeGetTensorImpl()->version_counter().current_version(), version);
  scaler.mark_unscaled(true);
  scaler.update();
  EXPECT_EQ(scale.item<float>(), 1024.0f);
  EXPECT_EQ(scaler.scale_value(), 1024.0f);
  scaler.load_state(8.0f, 1);   // a state loaded later goes there too
  EXPECT_EQ(scale.item<float>(), 8.0f);
  EXPECT_EQ(tracker.item<int32_t>(), 1);

  EXPECT_THROW(scaler.share_state(torch::ones({1}, torch::TensorOptions().dtype(torch::kDouble)), tracker, 1.0f, 0),
               std::invalid_argument);
  EXPECT_THROW(scaler.share_state(torch::ones({2}, torch::TensorOptions().dtype(torch::kFloat)), tracker, 1.0f, 0),
               std::invalid_argument);
  EXPECT_THROW(scaler.share_state(scale, torch::zeros({1}, torch::TensorOptions().dtype(torch::kLong)), 1.0f, 0),
               std::invalid_argument);
}

// Steps the probe failed are overflows to the scaler, but a run of them backs off once; an
// overflow of the gradients themselves always backs off, failures or not around it.
TEST(GradScaler, ARunOfProbeFailuresBacksOffOnce) {
  keel::probe::GradScaler scaler;
  const float s = scaler.scale_value();
  auto fail = [&] {
    scaler.mark_probe_failed();
    scaler.update();
  };
  auto step = [&](bool found_inf) {
    scaler.mark_unscaled(found_inf);
    scaler.update();
  };
  fail();
  EXPECT_EQ(scaler.scale_value(), s / 2);
  fail();
  fail();
  EXPECT_EQ(scaler.scale_value(), s / 2) << "held while the probe keeps failing";
  EXPECT_EQ(scaler.growth_tracker(), 0);
  EXPECT_EQ(scaler.skipped_total(), 3);
  step(/*found_inf=*/true);
  EXPECT_EQ(scaler.scale_value(), s / 4) << "a real overflow backs off";
  fail();
  EXPECT_EQ(scaler.scale_value(), s / 8) << "a new run of failures backs off once again";
  step(/*found_inf=*/false);
  fail();
  EXPECT_EQ(scaler.scale_value(), s / 16);
  EXPECT_EQ(scaler.skipped_total(), 6);
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
