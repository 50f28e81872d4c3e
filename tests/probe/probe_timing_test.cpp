// ProbeTiming's stages: where the probe's time on the training thread went, as
// keel-bench-probe --tensors-only prints it per tensor (BENCHMARKS.md, "Per-tensor cost").
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <optional>

#include "keel/probe/probe.hpp"
#include "quiet_options.hpp"

namespace {

struct TwoLayers : torch::nn::Module {
  TwoLayers() : a(register_module("a", torch::nn::Linear(8, 8))), b(register_module("b", torch::nn::Linear(8, 2))) {}
  torch::Tensor forward(const torch::Tensor& x) { return b->forward(torch::relu(a->forward(x))); }
  torch::nn::Linear a, b;
};

// `steps` SGD steps of TwoLayers under a probe with `options`; after_step sees each one's timing.
template <typename AfterStep>
void run_steps(int steps, const keel::probe::ProbeOptions& options, AfterStep after_step) {
  torch::manual_seed(3);
  TwoLayers model;
  torch::optim::SGD optimizer(model.parameters(), torch::optim::SGDOptions(0.1));
  keel::probe::Probe probe(model, optimizer, options);
  const torch::Tensor x = torch::randn({4, 8}), y = torch::randn({4, 2});
  for (int step = 0; step < steps; ++step) {
    optimizer.zero_grad();
    torch::Tensor loss = torch::mse_loss(model.forward(x), y);
    loss.backward();
    probe.step(loss);
    after_step(probe.last_timing());
  }
}

TEST(ProbeTiming, AHostStepsStagesAreEachMeasuredAndAddUpToItsTime) {
  keel::probe::ProbeTiming t;
  run_steps(3, keel::test::quiet(), [&t](const keel::probe::ProbeTiming& timing) { t = timing; });
  // Every stage ran on the host in a CPU step with the default cadence (update_ratio due).
  for (double stage : {t.begin_us, t.layout_us, t.grads_us, t.update_us, t.record_us, t.end_us}) EXPECT_GT(stage, 0.0);
  const double stages = t.begin_us + t.layout_us + t.grads_us + t.update_us + t.record_us + t.end_us;
  // Only a few statements between record() and end_step() fall outside every stage.
  EXPECT_LE(stages, t.probe_us + 1e-6);
  EXPECT_NEAR(stages, t.probe_us, 0.05 * t.probe_us + 5.0);
  // The reductions run inside the gradient and update stages.
  EXPECT_LE(t.reduce_us, t.grads_us + t.update_us + 1e-6);
  EXPECT_LE(t.backward_us, t.grads_us);
}

// The small gradients measured inside backward count in the gradient stage as backward_us; with
// measure_in_backward off there is none. Every 8th hook is timed: 8 steps of 4 tensors see 4.
double backward_us_over_8_steps(std::optional<bool> measure_in_backward) {
  keel::probe::ProbeOptions options = keel::test::quiet();
  options.measure_in_backward = measure_in_backward;
  double backward_us = 0;
  run_steps(8, options, [&backward_us](const keel::probe::ProbeTiming& t) {
    EXPECT_LE(t.backward_us, t.grads_us);
    backward_us += t.backward_us;
  });
  return backward_us;
}

TEST(ProbeTiming, TheMeasuringInsideBackwardIsTheGradientStagesAndOnlyWithTheHooks) {
  EXPECT_GT(backward_us_over_8_steps(true), 0.0);
  EXPECT_EQ(backward_us_over_8_steps(false), 0.0);
}

// Unset, the option is decided for the model: a few small tensors fit in any cache, and the
// pass measures them all.
TEST(ProbeTiming, ASmallModelIsMeasuredInThePassByDefault) {
  EXPECT_EQ(backward_us_over_8_steps(std::nullopt), 0.0);
}

}  // namespace
