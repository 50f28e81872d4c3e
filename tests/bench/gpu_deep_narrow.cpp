#include "gpu_deep_narrow.hpp"

#include <torch/cuda.h>

#include "front/fused_step.hpp"
#include "median.hpp"

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cuda_sync_counter.hpp"
#include "deep_narrow.hpp"
#include "keel/probe/probe.hpp"
#include "naive_checks.hpp"

namespace keel::bench {
namespace {

using Clock = std::chrono::steady_clock;

enum class Kind { kPlain, kFused, kProbed };

struct Copy {
  std::string name;
  Kind kind = Kind::kPlain;
  std::shared_ptr<DeepNarrow> model;
  std::unique_ptr<torch::optim::AdamW> optimizer;
  std::unique_ptr<keel::probe::Probe> probe;
  keel::probe::FusedOptimizerStep fused;
  torch::Tensor found_inf;   // fused: always 0
  std::vector<double> step_ms, probe_us;
  int64_t syncs = 0, steps_counted = 0;
};

Copy make_copy(const std::string& name, Kind kind, int64_t layers, const torch::Device& device) {
  Copy c;
  c.name = name;
  c.kind = kind;
  torch::manual_seed(0);   // every copy the same weights
  c.model = std::make_shared<DeepNarrow>(layers);
  c.model->to(device);
  c.optimizer = std::make_unique<torch::optim::AdamW>(c.model->parameters(), torch::optim::AdamWOptions(1e-4));
  if (kind == Kind::kFused) c.found_inf = torch::zeros({1}, torch::TensorOptions().dtype(torch::kFloat).device(device));
  return c;
}

void synchronize(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize();
}

void train_step(Copy& c, const torch::Tensor& x, bool measured) {
  c.optimizer->zero_grad();
  auto loss = c.model->forward(x).pow(2).mean();
  loss.backward();
  switch (c.kind) {
    case Kind::kPlain:
      c.optimizer->step();
      break;
    case Kind::kFused:
      c.fused.step(*c.optimizer, c.found_inf);
      c.fused.settle(true);
      break;
    case Kind::kProbed:
      c.probe->step(loss);
      if (measured) c.probe_us.push_back(c.probe->last_timing().probe_us);
      break;
  }
}

std::string number(double x) {
  char text[64];
  std::snprintf(text, sizeof text, "%.4g", x);
  return text;
}

}  // namespace

int run_deep_narrow_gpu_bench(const DeepNarrowGpuRun& run) {
  const int64_t layers = run.tensors / 2;
  const int64_t tensors = 2 * layers;
  if (run.device.is_cuda() && !torch::cuda::is_available()) {
    std::puts("keel-bench-gpu: no CUDA device is available to this libtorch: nothing to measure");
    std::puts("{\"bench\":\"keel-bench-gpu\",\"cuda\":false,\"model\":\"deep-narrow\"}");
    return 0;
  }
  if (!keel::probe::FusedOptimizerStep::available()) {
    std::puts("keel-bench-gpu: this libtorch has no fused AdamW kernel (2.3 and later have it): no baseline");
    return 1;
  }
  std::vector<Copy> copies;
  copies.push_back(make_copy("plain", Kind::kPlain, layers, run.device));
  copies.push_back(make_copy("fused", Kind::kFused, layers, run.device));
  copies.push_back(make_copy("keel_defaults", Kind::kProbed, layers, run.device));
  const auto x = torch::randn({run.batch, 16}, torch::TensorOptions().device(run.device));
  std::printf("keel-bench-gpu: deep narrow, %lld tensors (%lld Linear(16, 16)), batch %lld, fp32, AdamW, on %s\n",
              static_cast<long long>(tensors), static_cast<long long>(layers), static_cast<long long>(run.batch),
              run.device.str().c_str());

  // One plain step each, so gradients and optimizer state exist, then the probe is attached
  // and stepped once: its plan and first layout are not what a step costs.
  for (auto& c : copies) {
    if (c.kind == Kind::kProbed) {
      c.optimizer->zero_grad();
      auto loss = c.model->forward(x).pow(2).mean();
      loss.backward();
      c.optimizer->step();
      keel::probe::ProbeOptions options;
      options.endpoint = "tcp://127.0.0.1:*";
      options.accept_commands = false;
      c.probe = std::make_unique<keel::probe::Probe>(*c.model, *c.optimizer, options);
    }
    train_step(c, x, false);
  }
  synchronize(run.device);

  SyncCounter counter;
  for (int round = 0; round < run.warmup_rounds + run.rounds; ++round) {
    const bool measured = round >= run.warmup_rounds;
    for (size_t k = 0; k < copies.size(); ++k) {
      Copy& c = copies[(k + static_cast<size_t>(round)) % copies.size()];
      synchronize(run.device);
      const int64_t syncs_before = counter.count;
      if (run.device.is_cuda()) set_sync_debug(true);
      const auto start = Clock::now();
      for (int s = 0; s < run.steps_per_round; ++s) train_step(c, x, measured);
      if (run.device.is_cuda()) set_sync_debug(false);
      const int64_t syncs = counter.count - syncs_before;
      synchronize(run.device);   // the round's time includes the device finishing its work
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
      if (measured) {
        c.step_ms.push_back(ms / run.steps_per_round);
        c.syncs += syncs;
        c.steps_counted += run.steps_per_round;
      }
    }
  }

  const double fused_ms = median(copies[1].step_ms);
  std::string json = "{\"bench\":\"keel-bench-gpu\",\"cuda\":" + std::string(run.device.is_cuda() ? "true" : "false") +
                     ",\"model\":\"deep-narrow\",\"tensors\":" + std::to_string(tensors) +
                     ",\"rounds\":" + std::to_string(run.rounds) + ",\"steps_per_round\":" +
                     std::to_string(run.steps_per_round);
  std::printf("%-14s %10s %10s %11s %14s %13s\n", "variant", "ms/step", "vs fused", "syncs/step", "probe us/step",
              "ns per tensor");
  for (const auto& c : copies) {
    const double ms = median(c.step_ms);
    const double vs_fused = fused_ms > 0 ? (ms / fused_ms - 1.0) * 100.0 : 0.0;
    const double syncs =
        c.steps_counted > 0 ? static_cast<double>(c.syncs) / static_cast<double>(c.steps_counted) : 0.0;
    std::printf("%-14s %10.2f %9.2f%% %11.2f", c.name.c_str(), ms, vs_fused, syncs);
    json += ",\"" + c.name + "_ms\":" + number(ms) + ",\"" + c.name + "_syncs_per_step\":" + number(syncs);
    if (c.kind != Kind::kFused) json += ",\"" + c.name + "_vs_fused_pct\":" + number(vs_fused);
    if (c.kind == Kind::kProbed) {
      const double us = median(c.probe_us);
      const double ns_per_tensor = us * 1e3 / static_cast<double>(tensors);
      std::printf(" %14.0f %13.1f", us, ns_per_tensor);
      json += ",\"" + c.name + "_probe_us\":" + number(us) + ",\"" + c.name + "_probe_ns_per_tensor\":" +
              number(ns_per_tensor);
    }
    std::printf("\n");
  }
  std::printf("target: keel_defaults <= 2%% over fused, 0 syncs a step%s\n",
              run.device.is_cuda() ? "" : " (on a GPU; this run was on the CPU, a check of the bench only)");
  json += "}";
  std::puts(json.c_str());
  return 0;
}

}  // namespace keel::bench
