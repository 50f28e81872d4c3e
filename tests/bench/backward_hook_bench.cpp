#include "backward_hook_bench.hpp"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <vector>

#include "layout/backward_order.hpp"
#include "median.hpp"
#include "reduce/accumulation_stats.hpp"
#include "deep_narrow.hpp"
#include "naive_checks.hpp"

namespace keel::bench {
namespace {

using Clock = std::chrono::steady_clock;

enum Way : size_t { kPlain, kTensorHooks, kKeelHooks, kHeldAccumulators, kMeasuringHooks, kWays };

// What one way adds to the model while it steps, removed before the next way's turn.
struct Attachment {
  std::vector<torch::Tensor> params;
  std::vector<unsigned> tensor_hooks;
  std::vector<std::atomic<int64_t>> arrivals;
  std::atomic<int64_t> next{0};
  std::optional<probe::BackwardOrder> order;
  std::optional<probe::AccumulationStats> measurements;
  std::vector<decltype(torch::autograd::impl::grad_accumulator(std::declval<const torch::Tensor&>()))> accumulators;

  Attachment(const std::vector<torch::Tensor>& model_params, Way way) : params(model_params), arrivals(params.size()) {
    if (way == kTensorHooks) {
      for (size_t i = 0; i < params.size(); ++i) {
        tensor_hooks.push_back(params[i].register_hook([this, i](const torch::Tensor&) {
          if (arrivals[i].load(std::memory_order_relaxed) == -1) arrivals[i].store(next.fetch_add(1));
        }));
      }
    } else if (way == kKeelHooks) {
      order.emplace(params);
    } else if (way == kMeasuringHooks) {
      order.emplace(params);
      measurements.emplace(params, /*hook=*/true);
      measurements->set_weighs(true);   // a plain SGD: the probe reads W beside the gradients
    } else if (way == kHeldAccumulators) {
      for (const auto& p : params) accumulators.push_back(torch::autograd::impl::grad_accumulator(p));
    }
    for (auto& a : arrivals) a.store(-1);
  }
  ~Attachment() {
    for (size_t i = 0; i < tensor_hooks.size(); ++i) params[i].remove_hook(tensor_hooks[i]);
  }
};

}  // namespace

BackwardHookCost measure_backward_hooks(int64_t tensors, int rounds) {
  const int threads = torch::get_num_threads();
  torch::set_num_threads(1);
  torch::manual_seed(3);
  DeepNarrow model(std::max<int64_t>(1, tensors / 2));
  torch::optim::SGD optimizer(model.parameters(), torch::optim::SGDOptions(1e-3));
  const std::vector<torch::Tensor> params = model.parameters();
  const torch::Tensor x = torch::randn({8, 16});
  const torch::Tensor y = torch::randn({8, 16});
  std::array<std::vector<double>, kWays> ms;
  const int warmup = 3;
  for (int round = 0; round < warmup + rounds; ++round) {
    for (size_t k = 0; k < kWays; ++k) {
      const Way way = static_cast<Way>((round + k) % kWays);   // each way in every position
      Attachment attached(params, way);
      const auto start = Clock::now();
      optimizer.zero_grad();
      torch::mse_loss(model.forward(x), y).backward();
      optimizer.step();
      const double step_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
      if (round >= warmup) ms[way].push_back(step_ms);
    }
  }
  torch::set_num_threads(threads);
  BackwardHookCost cost;
  cost.tensors = static_cast<int64_t>(params.size());
  cost.rounds = rounds;
  cost.plain_ms = median(ms[kPlain]);
  const auto pct = [&](Way way) { return 100.0 * (median(ms[way]) - cost.plain_ms) / cost.plain_ms; };
  cost.tensor_hooks_pct = pct(kTensorHooks);
  cost.keel_hooks_pct = pct(kKeelHooks);
  cost.held_accumulators_pct = pct(kHeldAccumulators);
  cost.measuring_hooks_pct = pct(kMeasuringHooks);
  return cost;
}

}  // namespace keel::bench
