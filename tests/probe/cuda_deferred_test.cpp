// The probe on a CUDA device, what the training thread waits for: deferred steps that wait for
// nothing, the loss scaler decided on the device, SGD's first momentum step, an unscale by the
// caller between deferred steps, the spike policy on the device, the one wait a host
// decision costs, weight norms included, and the closure form, which decides on the host.
// Built where libtorch has CUDA; every test reports as skipped (with the reason) where there
// is no CUDA device.
#include <ATen/cuda/Sleep.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cuda_probe_rig.hpp"
#include "keel/probe/grad_scaler.hpp"
#include "keel/probe/probe.hpp"
#include "reference_stats.hpp"
#include "two_layer_net.hpp"

namespace {

using namespace keel::test::cuda_rig;

TEST(CudaProbe, ScalerUnscalesInThePassAndSkipsAnOverflow) {
  SKIP_WITHOUT_DEVICE();
  MixedPrecisionNet net;
  torch::optim::AdamW opt(net->parameters(), torch::optim::AdamWOptions(1e-3));
  keel::probe::Probe probe(*net, opt, quiet_options());
  keel::probe::GradScaler scaler;
  probe.use_scaler(&scaler);
  const double scale = scaler.scale_value();
  auto loss = backward(net, opt, 3, scale);
  const auto scaled = grads_on_host(net);
  auto outcome = probe.step(loss);
  ASSERT_TRUE(outcome.applied) << outcome.skip_reason;
  expect_grad_metrics(probe, scaled, scale);
  // The optimizer read unscaled gradients: they were unscaled in place on the device.
  const auto unscaled = grads_on_host(net);
  for (size_t i = 0; i < unscaled.size(); ++i) {
    EXPECT_TRUE(torch::allclose(unscaled[i].to(torch::kDouble), scaled[i].to(torch::kDouble) / scale, 1e-2, 0.0))
        << "layer " << i;
  }

  loss = backward(net, opt, 4, scaler.scale_value());
  keel::test::poison(net->fc->bias);
  const auto before = on_host(keel::test::params_and_adamw_state(*net, opt));
  outcome = probe.step(loss);
  EXPECT_FALSE(outcome.applied);
  EXPECT_EQ(outcome.skip_reason, "scaler");
  EXPECT_LT(scaler.scale_value(), scale);
  EXPECT_TRUE(keel::test::all_identical(before, on_host(keel::test::params_and_adamw_state(*net, opt))));
}

// A scaler whose scale lives on the device (scale() saw a loss there) is decided there too:
// the unscale fused into the pass, the overflow in the verdict the fused AdamW reads, and the
// scale's backoff and growth by ATen's _amp_update_scale_, read back when the step settles.
// No host wait per step, and the same trajectory as PyTorch's algorithm (growth every 2 clean
// steps, backoff on the poisoned one).
TEST(CudaProbe, TheScalerDecidesOnTheDeviceWithNoHostWait) {
  SKIP_WITHOUT_DEVICE();
  MixedPrecisionNet net;
  torch::optim::AdamW opt(net->parameters(), torch::optim::AdamWOptions(1e-3));
  keel::probe::Probe probe(*net, opt, quiet_options());
  keel::probe::GradScalerOptions scaler_options;
  scaler_options.growth_interval = 2;
  keel::probe::GradScaler scaler(scaler_options);
  probe.use_scaler(&scaler);
  constexpr int64_t kPoisoned = 3;
  // The scale each step was scaled with, and the one it leaves (PyTorch's algorithm).
  const std::vector<float> scaled_with{65536, 65536, 131072, 131072, 65536, 65536, 131072};
  std::vector<torch::Tensor> step1_grads;
  for (int64_t step = 0; step < 7; ++step) {
    torch::manual_seed(step);
    opt.zero_grad();
    auto x = torch::randn({16, 5}, torch::TensorOptions().device(torch::kCUDA));
    auto loss = net->forward(x).pow(2).mean();
    scaler.scale(loss).backward();
    if (step == kPoisoned) keel::test::poison(net->mid->weight);
    if (step == 1) step1_grads = grads_on_host(net);
    const auto before = on_host(keel::test::params_and_adamw_state(*net, opt));
    torch::cuda::synchronize();
    keel::probe::StepOutcome outcome;
    {
      SyncCounter syncs;
      outcome = probe.step(loss.detach());
      if (step > 0) {
        EXPECT_EQ(syncs.count, 0) << "step " << step;
      }
    }
    EXPECT_FALSE(outcome.settled) << "step " << step;
    if (step == 0) continue;
    // Step - 1 has settled: its outcome, its record and the scaler's host values.
    const auto& settled = probe.last_settled();
    ASSERT_EQ(settled.step, step - 1);
    EXPECT_EQ(settled.applied, step - 1 != kPoisoned) << "step " << step - 1;
    if (step - 1 == kPoisoned) {
      EXPECT_EQ(settled.skip_reason, "scaler");
    }
    EXPECT_EQ(scaler.scale_value(), scaled_with[step]) << "after step " << step - 1;
    const auto& record = probe.last_record();
    ASSERT_TRUE(record.scaler.has_value());
    EXPECT_EQ(record.scaler->found_inf, step - 1 == kPoisoned);
    EXPECT_EQ(record.scaler->scale, scaled_with[step]);
    if (step - 1 == 1) expect_grad_metrics(probe, step1_grads, scaled_with[1]);
    if (step == kPoisoned) {
      // Compared once the step settled: the host's step count, counted when the fused step was
      // enqueued, is taken back then (seen on an H100: compared before, it was one too high).
      // The next step finds nothing left to settle and still records this one as the last.
      probe.settle();
      EXPECT_TRUE(keel::test::all_identical(before, on_host(keel::test::params_and_adamw_state(*net, opt))))
          << "the device skipped the poisoned update";
    }
  }
  probe.settle();
  EXPECT_EQ(scaler.skipped_total(), 1);
  EXPECT_EQ(adamw_step_count(opt, net->fc->weight), 6) << "seven steps, one skipped";
}

// A deferred step waits for nothing: its results (and a watched tensor's) are read at the
// next step, when they have long arrived, and the fused AdamW step reads the verdict on the
// device.
TEST(CudaProbe, DeferredStepsWithEveryMetricCostNoHostWait) {
  SKIP_WITHOUT_DEVICE();
  MixedPrecisionNet net;
  torch::optim::AdamW opt(net->parameters(), torch::optim::AdamWOptions(1e-3));
  keel::probe::ProbeOptions options;   // the defaults: skip and dump on non-finite
  options.endpoint = "";
  keel::probe::Probe probe(*net, opt, options);
  probe.step(backward(net, opt, 5));   // first step: tables are planned and uploaded
  for (int64_t step = 6; step < 9; ++step) {
    auto loss = backward(net, opt, step);
    const auto logits = torch::randn({4, 16, 1000}, torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16));
    torch::cuda::synchronize();
    SyncCounter syncs;
    probe.watch("logits", logits);   // the fused watch kernel, read when the step settles
    const auto outcome = probe.step(loss);
    EXPECT_EQ(syncs.count, 0) << "step " << step;
    EXPECT_FALSE(outcome.settled);
    EXPECT_EQ(probe.last_settled().step, step - 6) << "the previous step settled";
  }
}

// SGD's first momentum step is deferred like the rest: the fused kernel's first-step mode makes
// the buffers libtorch's first step would, so no step of the run decides on the host.
// The closure form is decided on the host (its unsafe step must be known while the closure
// and batch are there), and names where a NaN born in the forward pass was born.
TEST(CudaProbe, TheClosureFormDecidesOnTheHostAndNamesTheOp) {
  SKIP_WITHOUT_DEVICE();
  MixedPrecisionNet net;
  torch::optim::AdamW opt(net->parameters(), torch::optim::AdamWOptions(1e-3));
  keel::probe::Probe probe(*net, opt, quiet_options());
  for (int64_t step = 0; step < 3; ++step) {
    const auto x = torch::randn({16, 5}, torch::TensorOptions().device(torch::kCUDA));
    const auto outcome = probe.step([&] {
      opt.zero_grad();
      auto loss = net->forward(x).pow(2).mean();
      // log of an exact 0 at step 2: -inf, and 0 * -inf is NaN.
      if (step == 2) loss = loss + 0 * torch::log(torch::zeros({}, x.options()));
      loss.backward();
      return loss;
    });
    EXPECT_TRUE(outcome.settled) << "step " << step << ": the closure form is not deferred";
  }
  EXPECT_FALSE(probe.last_settled().applied);
  const keel::wire::Event* event = nullptr;
  for (const auto& e : probe.last_events()) {
    if (e.kind == "first_nonfinite") event = &e;
  }
  ASSERT_NE(event, nullptr);
  ASSERT_TRUE(event->cause);
  EXPECT_EQ(event->cause->kind, "forward") << event->cause->sentence;
  EXPECT_EQ(event->cause->op, "aten::log") << event->cause->sentence;
  EXPECT_EQ(event->cause->module, "out") << event->cause->sentence;
}

TEST(CudaProbe, SgdsFirstMomentumStepIsTakenOnTheDevice) {
  SKIP_WITHOUT_DEVICE();
  MixedPrecisionNet net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  keel::probe::Probe probe(*net, opt, quiet_options());
  EXPECT_FALSE(probe.step(backward(net, opt, 5)).settled);
  probe.settle();
  EXPECT_TRUE(probe.last_settled().applied);
  EXPECT_EQ(opt.state().size(), net->parameters().size()) << "a momentum buffer for every parameter";
}

// The caller unscales the gradients (to clip them, say) between two deferred steps: the loss
// was scaled by the scale the device's update of the step before left, which the host has not
// yet read. unscale_() reads it first, so the gradients come out unscaled, not off by the
// growth (here x2 after every clean step).
TEST(CudaProbe, AnUnscaleBetweenDeferredStepsDividesByTheScaleTheLossWasScaledWith) {
  SKIP_WITHOUT_DEVICE();
  MixedPrecisionNet net;
  torch::optim::AdamW opt(net->parameters(), torch::optim::AdamWOptions(1e-3));
  keel::probe::Probe probe(*net, opt, quiet_options());
  keel::probe::GradScalerOptions scaler_options;
  scaler_options.growth_interval = 1;
  keel::probe::GradScaler scaler(scaler_options);
  probe.use_scaler(&scaler);
  const float initial = scaler.scale_value();
  for (int64_t step = 0; step < 2; ++step) {
    torch::manual_seed(step);
    opt.zero_grad();
    auto x = torch::randn({16, 5}, torch::TensorOptions().device(torch::kCUDA));
    auto loss = net->forward(x).pow(2).mean();
    const auto reference = torch::autograd::grad({loss}, net->parameters(), {}, /*retain_graph=*/true);
    scaler.scale(loss).backward();
    if (step == 1) {
      scaler.unscale_(opt);
      EXPECT_EQ(scaler.scale_value(), 2 * initial) << "the device's growth after step 0, read by unscale_()";
      const auto params = net->parameters();
      for (size_t i = 0; i < params.size(); ++i) {
        EXPECT_TRUE(torch::allclose(params[i].grad().to(torch::kDouble), reference[i].to(torch::kDouble), 2e-2, 1e-6))
            << "layer " << i;
      }
    }
    const auto outcome = probe.step(loss.detach());
    EXPECT_EQ(outcome.settled, step == 1) << "step 0 is deferred; step 1, unscaled by the caller, decides on the host";
    EXPECT_TRUE(outcome.applied) << outcome.skip_reason;
  }
  EXPECT_EQ(scaler.scale_value(), 4 * initial);
  EXPECT_EQ(scaler.skipped_total(), 0);
}

// A decision the device cannot take makes the step wait for its results: here a dump on
// non-finite gradients with nothing to skip them, which must be taken before the update (a
// scaler is the other). One host wait per step at most.
TEST(CudaProbe, AHostDecisionCostsOneHostWaitPerStep) {
  SKIP_WITHOUT_DEVICE();
  MixedPrecisionNet net;
  torch::optim::AdamW opt(net->parameters(), torch::optim::AdamWOptions(1e-3));
  auto options = quiet_options();
  options.skip_on_nonfinite = false;
  options.dump_on_nonfinite = true;
  options.dump_dir = "/nonexistent/keel-not-written";
  options.cadence[static_cast<int>(LayerMetric::kParamNorm)] = 0;
  options.cadence[static_cast<int>(LayerMetric::kUpdateRatio)] = 0;
  keel::probe::Probe probe(*net, opt, options);
  probe.step(backward(net, opt, 5));
  for (int64_t step = 6; step < 9; ++step) {
    auto loss = backward(net, opt, step);
    torch::cuda::synchronize();
    SyncCounter syncs;
    EXPECT_TRUE(probe.step(loss).settled);
    // At most one: the results are waited for only if their event has not passed yet, which on
    // a model this small it often has (seen on an H100: 0 in three runs of four).
    EXPECT_LE(syncs.count, 1) << "step " << step;
  }
}

// An optimizer with no fused step (RMSprop) is decided on the host, with the default metrics:
// the weight norms are enqueued with the gradient pass, so the step still waits once. The
// stream is kept busy first so that the gradients' wait is a real one (counted) and a weight
// pass enqueued after it would be caught waiting too.
TEST(CudaProbe, AHostDecisionWithTheWeightNormsStillWaitsOnce) {
  SKIP_WITHOUT_DEVICE();
  MixedPrecisionNet net;
  torch::optim::RMSprop opt(net->parameters(), torch::optim::RMSpropOptions(1e-3));
  keel::probe::Probe probe(*net, opt, quiet_options());
  probe.step(backward(net, opt, 5));
  const uint32_t param_norm = 1u << static_cast<int>(LayerMetric::kParamNorm);
  for (int64_t step = 6; step < 9; ++step) {
    auto loss = backward(net, opt, step);
    torch::cuda::synchronize();
    at::cuda::sleep(50'000'000);   // tens of milliseconds of GPU time before the probe's passes
    SyncCounter syncs;
    const auto outcome = probe.step(loss);
    EXPECT_TRUE(outcome.settled);
    EXPECT_EQ(syncs.count, 1) << "step " << step;
    EXPECT_TRUE(probe.last_record().metric_mask & param_norm) << "the weight norms were measured";
  }
}

// The spike policy's bound goes to the device verdict: a step whose norm jumps far above the
// window's is skipped there, as "spike", while the steps around it are applied.
TEST(CudaProbe, ASpikeIsSkippedOnTheDevice) {
  SKIP_WITHOUT_DEVICE();
  MixedPrecisionNet net;
  torch::optim::AdamW opt(net->parameters(), torch::optim::AdamWOptions(1e-4));
  auto options = quiet_options();
  options.skip_on_spike = true;
  options.spike_window = 16;
  options.spike_warmup = 8;
  keel::probe::Probe probe(*net, opt, options);
  for (int64_t step = 0; step < 12; ++step) {
    EXPECT_FALSE(probe.step(backward(net, opt, 100 + step)).settled);
    probe.settle();
    ASSERT_TRUE(probe.last_settled().applied) << "step " << step << ": " << probe.last_settled().skip_reason;
  }
  auto loss = backward(net, opt, 200);
  {
    torch::NoGradGuard no_grad;
    for (auto& p : net->parameters()) p.mutable_grad().mul_(1e4);
  }
  const auto before = on_host(keel::test::params_and_adamw_state(*net, opt));
  probe.step(loss);
  probe.settle();
  EXPECT_FALSE(probe.last_settled().applied);
  EXPECT_EQ(probe.last_settled().skip_reason, "spike");
  EXPECT_TRUE(keel::test::all_identical(before, on_host(keel::test::params_and_adamw_state(*net, opt))));
  probe.step(backward(net, opt, 201));
  probe.settle();
  EXPECT_TRUE(probe.last_settled().applied) << probe.last_settled().skip_reason;
}

}  // namespace
