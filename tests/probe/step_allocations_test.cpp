// The probe's step on the training thread allocates no more on a model of many tensors than on
// one of few (issue 30: "no per-tensor allocation or string work per step"). A tensor made in
// the step allocates its TensorImpl with operator new, so counting operator new catches those
// too. Its own binary: it replaces the global operator new.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdint>
#include <optional>

#include "allocation_counter.hpp"
#include "bench/deep_narrow.hpp"
#include "keel/probe/probe.hpp"

namespace {

// Mean operator new calls on this thread per training step (zero_grad, forward, backward on
// this thread as on any CPU model, then probe.step(loss) with `probed`, else optimizer.step()),
// over the steps after a warm-up. The probe publishes on loopback, as by default.
double allocations_per_step(int64_t tensors, bool probed) {
  constexpr int kWarmup = 20;   // past the publisher ring's first use of each slot (8 here)
  constexpr int kMeasured = 6;
  torch::manual_seed(0);
  keel::bench::DeepNarrow model(tensors / 2);
  torch::optim::SGD optimizer(model.parameters(), torch::optim::SGDOptions(1e-3));
  keel::probe::ProbeOptions options;
  options.endpoint = "tcp://127.0.0.1:*";
  options.record_dir = "";
  options.dump_on_nonfinite = false;
  options.queue_capacity = 8;
  std::optional<keel::probe::Probe> probe;
  if (probed) probe.emplace(model, optimizer, options);
  const torch::Tensor x = torch::randn({4, 16});
  const torch::Tensor y = torch::randn({4, 16});
  int64_t total = 0;
  for (int step = 0; step < kWarmup + kMeasured; ++step) {
    keel::test::my_allocations = 0;
    keel::test::count_mine = true;   // this thread only: the probe's publisher and command threads have their own budgets
    optimizer.zero_grad();
    const torch::Tensor loss = torch::mse_loss(model.forward(x), y);
    loss.backward();   // with the probe's hooks, which measure small gradients in it
    if (probe) {
      probe->step(loss);
    } else {
      optimizer.step();
    }
    keel::test::count_mine = false;
    if (step >= kWarmup) total += keel::test::my_allocations;
  }
  return static_cast<double>(total) / kMeasured;
}

TEST(StepAllocations, DoNotGrowWithTheTensorCount) {
  const double plain_small = allocations_per_step(20, false);
  const double probed_small = allocations_per_step(20, true);
  const double plain_large = allocations_per_step(2000, false);
  const double probed_large = allocations_per_step(2000, true);
  const double probe_small = probed_small - plain_small;
  const double probe_large = probed_large - plain_large;
  // The training step's own allocations (autograd's graph, the optimizer's) are the same with
  // and without the probe. A few a step may be the probe's own (an event's text); 100 times
  // the tensors must not bring one more per tensor, nor one per ten.
  EXPECT_LE(probe_large, probe_small + 20) << "the probe's step: " << probe_small << " allocations at 20 tensors, "
                                           << probe_large << " at 2,000 (a plain training step's: " << plain_small
                                           << " and " << plain_large << ")";
  RecordProperty("probe_allocations_20", std::to_string(probe_small));
  RecordProperty("probe_allocations_2000", std::to_string(probe_large));
}

}  // namespace
