#include "tensor_count_bench.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <tuple>

#include "keel/probe/probe.hpp"
#include "keel/wire/codec.hpp"
#include "deep_narrow.hpp"
#include "reduce/backward_measuring.hpp"
#include "median.hpp"
#include "naive_checks.hpp"

namespace keel::bench {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

struct Trainee {
  explicit Trainee(int64_t layers) : model(std::make_shared<DeepNarrow>(layers)),
                                     optimizer(model->parameters(), torch::optim::SGDOptions(1e-3)) {}
  torch::Tensor forward_backward(const torch::Tensor& x, const torch::Tensor& y) {
    optimizer.zero_grad();
    torch::Tensor loss = torch::mse_loss(model->forward(x), y);
    loss.backward();
    return loss;
  }
  std::shared_ptr<DeepNarrow> model;
  torch::optim::SGD optimizer;
};

// (median of `a`) / (median of `b`) - 1, in percent.
double percent_over(const std::vector<double>& a, const std::vector<double>& b) {
  const double base = median(b);
  return base > 0 ? 100.0 * (median(a) - base) / base : 0.0;
}

TensorCountCost measure_one(int64_t tensors, int rounds) {
  const int64_t layers = std::max<int64_t>(1, tensors / 2);
  torch::manual_seed(1);
  // Four copies of the model: plain, probed, probed measuring the other way, and a second
  // plain one (control), whose A/B against the first is what two unprobed copies differ by on
  // this machine (their memory's placement): the floor under which the probe's A/B says
  // nothing. That difference reached 4% at 50,000 tensors, so the copies also swap roles
  // halfway (the probed copy trains plain and the plain one probed, likewise the other two),
  // and each A/B is the mean of the two halves'.
  std::vector<std::unique_ptr<Trainee>> copies;
  for (int c = 0; c < 4; ++c) copies.push_back(std::make_unique<Trainee>(layers));
  probe::ProbeOptions options;
  options.endpoint = "tcp://127.0.0.1:*";
  options.record_dir = "";
  options.dump_on_nonfinite = false;
  // Steady state: each slot of the publisher's ring allocates its record's buffers the first
  // time it is used, in a heap that autograd's freed tensors fragment (a large allocation
  // there consolidates it first: a fifth of the probe's time at 2,000 tensors). A small ring
  // is used up in the warm-up rounds, as a real run's 256 slots are in its first 256 steps.
  // Above 10,000 tensors a step takes a second or so here, and each warm-up round is one
  // measured round fewer in the same time: a ring of 2 there (the publisher sends a record in
  // a few milliseconds, so 2 slots never fill).
  options.queue_capacity = tensors > 10000 ? 2 : 8;
  // The third copy measures its small gradients the other way from the default's choice.
  const bool default_in_backward = probe::measures_in_backward(std::nullopt, copies[0]->model->parameters(), {},
                                                               probe::last_level_cache_bytes());
  probe::ProbeOptions other_way = options;
  other_way.measure_in_backward = !default_in_backward;
  const torch::Tensor x = torch::randn({8, 16});
  const torch::Tensor y = torch::randn({8, 16});

  TensorCountCost cost;
  cost.tensors = layers * 2;
  cost.rounds = rounds;
  std::vector<double> plain_ms, probed_ms, probe_us, reduce_us, other_probe_us;
  std::vector<double> begin_us, layout_us, grads_us, backward_us, update_us, record_us, end_us;
  const int warmup = static_cast<int>(options.queue_capacity) + 3;
  enum Way { kPlain, kProbed, kOtherWay, kControl, kWays };
  // Which copy plays each way, in the first half and the second.
  constexpr int kRoles[2][kWays] = {{0, 1, 2, 3}, {1, 0, 3, 2}};
  for (int half = 0; half < 2; ++half) {
    Trainee& plain = *copies[kRoles[half][kPlain]];
    Trainee& probed = *copies[kRoles[half][kProbed]];
    Trainee& probed_other_way = *copies[kRoles[half][kOtherWay]];
    Trainee& control = *copies[kRoles[half][kControl]];
    // Attached for this half; the last half's probes are gone, their hooks with them.
    probe::Probe probe(*probed.model, probed.optimizer, options);
    probe::Probe probe_other_way(*probed_other_way.model, probed_other_way.optimizer, other_way);
    const int measured = half == 0 ? (rounds + 1) / 2 : rounds / 2;
    std::vector<double> half_ms[kWays];
    // The four in turn, each in every position across rounds, each turn kStepsPerTurn steps of
    // which only the last is measured: a step right after another way's runs in what that
    // one left behind (its copy's allocations freed and made, another model in cache), which
    // a real run's steps never do. Measured on every step, that aftermath was about 2% of a
    // 2,000-tensor step: it put an unprobed copy 2.5% behind the other (A/A) when it followed
    // the probed ones, and 1.3% ahead when the order was changed so that the other did.
    constexpr int kStepsPerTurn = 2;
    for (int round = 0; round < warmup + measured; ++round) {
      for (int k = 0; k < kWays; ++k) {
        const Way way = static_cast<Way>((round + k) % kWays);
        for (int turn_step = 0; turn_step < kStepsPerTurn; ++turn_step) {
          const auto start = Clock::now();
          if (way == kProbed) {
            probe.step(probed.forward_backward(x, y));
          } else if (way == kOtherWay) {
            probe_other_way.step(probed_other_way.forward_backward(x, y));
          } else {
            Trainee& unprobed = way == kPlain ? plain : control;
            unprobed.forward_backward(x, y);
            unprobed.optimizer.step();
          }
          if (round < warmup || turn_step == 0) continue;
          const double step_ms = ms_since(start);
          half_ms[way].push_back(step_ms);
          if (way == kPlain) plain_ms.push_back(step_ms);
          if (way == kOtherWay) other_probe_us.push_back(probe_other_way.last_timing().probe_us);
          if (way != kProbed) continue;
          probed_ms.push_back(step_ms);
          const probe::ProbeTiming& t = probe.last_timing();
          probe_us.push_back(t.probe_us);
          reduce_us.push_back(t.reduce_us);
          begin_us.push_back(t.begin_us);
          layout_us.push_back(t.layout_us);
          grads_us.push_back(t.grads_us);
          backward_us.push_back(t.backward_us);
          update_us.push_back(t.update_us);
          record_us.push_back(t.record_us);
          end_us.push_back(t.end_us);
        }
      }
    }
    cost.overhead_pct += percent_over(half_ms[kProbed], half_ms[kPlain]) / 2;
    cost.other_overhead_pct += percent_over(half_ms[kOtherWay], half_ms[kPlain]) / 2;
    cost.control_pct += percent_over(half_ms[kControl], half_ms[kPlain]) / 2;
  }
  cost.plain_ms = median(plain_ms);
  cost.probed_ms = median(probed_ms);
  cost.other_probe_us = median(other_probe_us);
  cost.default_in_backward = default_in_backward;
  cost.probe_us = median(probe_us);
  cost.reduce_us = median(reduce_us);
  cost.probe_ns_per_tensor = 1000.0 * cost.probe_us / static_cast<double>(cost.tensors);
  cost.outside_ns_per_tensor = 1000.0 * (cost.probe_us - cost.reduce_us) / static_cast<double>(cost.tensors);
  const auto per_tensor_ns = [&](const std::vector<double>& us) { return 1000.0 * median(us) / static_cast<double>(cost.tensors); };
  cost.begin_ns = per_tensor_ns(begin_us);
  cost.layout_ns = per_tensor_ns(layout_us);
  cost.grads_ns = per_tensor_ns(grads_us);
  cost.backward_ns = per_tensor_ns(backward_us);
  cost.update_ns = per_tensor_ns(update_us);
  cost.record_ns = per_tensor_ns(record_us);
  cost.end_ns = per_tensor_ns(end_us);
  return cost;
}

// blocks.<b>.experts.<e>.{up,down}.weight: each block adds every expert's down(relu(up(x))).
struct Expert : torch::nn::Module {
  Expert()
      : up(register_module("up", torch::nn::Linear(torch::nn::LinearOptions(4, 4).bias(false)))),
        down(register_module("down", torch::nn::Linear(torch::nn::LinearOptions(4, 4).bias(false)))) {}
  torch::nn::Linear up, down;
};

struct MixtureOfExperts : torch::nn::Module {
  MixtureOfExperts(int blocks, int experts) {
    auto list = register_module("blocks", torch::nn::ModuleList());
    for (int b = 0; b < blocks; ++b) {
      auto block = std::make_shared<torch::nn::Module>();
      auto block_experts = block->register_module("experts", torch::nn::ModuleList());
      for (int e = 0; e < experts; ++e) block_experts->push_back(std::make_shared<Expert>());
      list->push_back(block);
      experts_of.push_back(block_experts);
    }
  }
  torch::Tensor forward(torch::Tensor x) {
    for (const auto& block : experts_of) {
      torch::Tensor sum = torch::zeros_like(x);
      for (const auto& module : *block) {
        auto* expert = module->as<Expert>();
        sum = sum + expert->down->forward(torch::relu(expert->up->forward(x)));
      }
      x = torch::tanh(sum);
    }
    return x;
  }
  std::vector<torch::nn::ModuleList> experts_of;
};

}  // namespace

WideWireCost measure_wide_wire(int blocks, int experts, int steps) {
  const int threads = torch::get_num_threads();
  torch::set_num_threads(1);
  torch::manual_seed(2);
  MixtureOfExperts rollup_model(blocks, experts), per_layer_model(blocks, experts);
  torch::optim::SGD rollup_opt(rollup_model.parameters(), torch::optim::SGDOptions(1e-3));
  torch::optim::SGD per_layer_opt(per_layer_model.parameters(), torch::optim::SGDOptions(1e-3));
  probe::ProbeOptions options;
  options.endpoint = "tcp://127.0.0.1:*";
  options.record_dir = "";
  options.dump_on_nonfinite = false;
  options.queue_capacity = 8;   // steady state after the warm-up, as in measure_one
  probe::Probe rollup(rollup_model, rollup_opt, options);
  options.layer_detail_above = 0;
  probe::Probe per_layer(per_layer_model, per_layer_opt, options);
  const torch::Tensor x = torch::randn({8, 4});
  const torch::Tensor y = torch::randn({8, 4});

  WideWireCost cost;
  cost.tensors = static_cast<int64_t>(rollup_model.parameters().size());
  cost.modules = rollup.description().modules.size();
  cost.steps = steps;
  std::vector<double> rollup_us, per_layer_us;
  double rollup_bytes = 0, per_layer_bytes = 0;
  const int warmup = static_cast<int>(options.queue_capacity) + 2;
  for (int step = 0; step < warmup + steps; ++step) {
    for (auto [probe, model, opt, us, bytes] :
         {std::tuple{&rollup, &rollup_model, &rollup_opt, &rollup_us, &rollup_bytes},
          std::tuple{&per_layer, &per_layer_model, &per_layer_opt, &per_layer_us, &per_layer_bytes}}) {
      opt->zero_grad();
      const torch::Tensor loss = torch::mse_loss(model->forward(x), y);
      loss.backward();
      probe->step(loss);
      if (step < warmup) continue;
      us->push_back(probe->last_timing().probe_us);
      *bytes += static_cast<double>(wire::encode(probe->last_record()).size());
    }
  }
  cost.rollup_bytes_per_step = rollup_bytes / steps;
  cost.per_layer_bytes_per_step = per_layer_bytes / steps;
  cost.rollup_probe_us = median(rollup_us);
  cost.per_layer_probe_us = median(per_layer_us);
  torch::set_num_threads(threads);
  return cost;
}

std::vector<TensorCountCost> measure_tensor_counts(const std::vector<int64_t>& tensors, int rounds) {
  const int threads = torch::get_num_threads();
  torch::set_num_threads(1);
  std::vector<TensorCountCost> out;
  for (int64_t n : tensors) {
    // A 50,000-tensor step takes about a second here: fewer rounds (with fewer warm-up rounds
    // before them, measure_one), never under 10, 5 in each half.
    const int scaled = n > 10000 ? std::max(10, rounds * 2 / 3) : rounds;
    out.push_back(measure_one(n, scaled));
  }
  torch::set_num_threads(threads);
  return out;
}

}  // namespace keel::bench
