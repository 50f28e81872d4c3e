// keel-bench-gpu: what the probe costs a training step on a GPU.
//
// Identical trainers (keel-demo's transformer, the GPT-2-small shape by default: 163M
// parameters, batch 8 x 1,024 tokens, bf16 autocast on fp32 master weights, AdamW, same seed)
// take turns, a round of steps each in rotating order, so the card's clocks and the machine's
// noise hit all of them alike:
//   plain          optimizer.step()
//   fused          the same AdamW step taken by ATen's fused kernel (FusedOptimizerStep, found_inf
//                  always 0), as the probe takes it when it decides on the device: the baseline
//                  that separates the probe's own cost from what the fused step saves
//   keel_grads     the probe with the gradient metrics only (param_norm, update_ratio off)
//   keel_defaults  the probe with ProbeOptions{} (every metric every step, skip on non-finite)
//   keel_full      the defaults plus the logits watched
//   naive          per-parameter isnan/isinf/norm checks read back with .item(), a weight copy
//   foreach        one _foreach_norm over every gradient, one copy to the host, the skip
//                  decided there
//   plain_rmsprop, keel_rmsprop
//                  the same with RMSprop, which has no fused kernel: the probe's host-decided
//                  path (compare the two with each other)
// Each probe publishes on loopback. Per variant: the median step time, host synchronisations
// per step (c10's CUDA sync debug mode, counted by a warning handler), and the device memory
// it holds beyond plain training. The last line is one JSON object. Without a CUDA device it
// says so and exits 0.
// --model deep-narrow measures the probe at many small tensors instead (gpu_deep_narrow.hpp).
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>

#include <CLI/CLI.hpp>

#include "front/fused_step.hpp"
#include "median.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "keel/probe/probe.hpp"
#include "cuda_sync_counter.hpp"
#include "gpu_deep_narrow.hpp"
#include "naive_checks.hpp"
#include "trainer.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using keel::bench::median;
using keel::bench::SyncCounter;
using keel::bench::set_sync_debug;

int64_t device_bytes_in_use() {
  return c10::cuda::CUDACachingAllocator::getDeviceStats(c10::cuda::current_device()).allocated_bytes[0].current;
}

struct Variant {
  std::string name;
  std::unique_ptr<keel::demo::Trainer> trainer;
  std::unique_ptr<keel::probe::Probe> probe;
  bool watch_logits = false;
  std::function<void(Variant&)> finish;   // after backward: the update, as this variant does it
  keel::probe::FusedOptimizerStep fused;   // fused: its step, with found_inf always 0
  torch::Tensor found_inf;
  std::vector<double> step_ms;
  int64_t syncs = 0;
  int64_t steps_counted = 0;
  int64_t extra_bytes = 0;
};

void train_step(Variant& v, int64_t step) {
  keel::demo::Faults none;
  v.trainer->schedule(step, none);
  auto loss = v.trainer->forward_backward(
      [&](const torch::Tensor& logits) {
        if (v.probe && v.watch_logits) v.probe->watch("logits", logits);
      },
      nullptr);
  if (v.probe) {
    v.probe->step(loss);
  } else {
    v.finish(v);
  }
}

// NaN-hunting code as it is usually written (naive_checks.hpp).
void naive_finish(Variant& v) {
  std::vector<torch::Tensor> copies;
  keel::bench::naive_step(*v.trainer, copies);
}

// The optimizer's step as the probe's deferred step takes it, with nothing to skip.
void fused_finish(Variant& v) {
  auto& optimizer = v.trainer->optimizer();
  const auto device = v.trainer->model()->parameters().front().device();
  if (!v.found_inf.defined()) v.found_inf = torch::zeros({1}, torch::TensorOptions().dtype(torch::kFloat).device(device));
  v.fused.step(optimizer, v.found_inf);
  v.fused.settle(true);
}

// One fused norm over every gradient, one copy to the host, the skip decided there.
void foreach_finish(Variant& v) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> grads;
  for (const auto& p : v.trainer->model()->parameters()) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  const auto norms = torch::stack(at::_foreach_norm(grads)).to(torch::kCPU);
  if (torch::isfinite(norms).all().item<bool>()) v.trainer->optimizer().step();
}

std::string json_number(double x) {
  char text[64];
  std::snprintf(text, sizeof text, "%.4g", x);
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"keel-bench-gpu: the keel probe's cost on a GPU training step"};
  std::string model = "gpt2-small";
  int rounds = 8;
  int warmup_rounds = 2;
  int steps_per_round = 5;
  keel::demo::TrainerConfig config;
  keel::bench::DeepNarrowGpuRun deep_narrow;
  std::string device = "cuda";
  app.add_option("--model", model,
                 "gpt2-small, char (keel-demo's small model, for a quick check) or deep-narrow (many small "
                 "tensors: gpu_deep_narrow.hpp)")
      ->check(CLI::IsMember({"gpt2-small", "char", "deep-narrow"}))->capture_default_str();
  app.add_option("--tensors", deep_narrow.tensors, "deep-narrow: parameter tensors")
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 24))->capture_default_str();
  app.add_option("--device", device,
                 "deep-narrow: cuda, or cpu to check the bench itself where there is no GPU")
      ->check(CLI::IsMember({"cuda", "cpu"}))->capture_default_str();
  app.add_option("--rounds", rounds, "measured rounds")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--warmup-rounds", warmup_rounds, "rounds run first and not measured")->capture_default_str();
  app.add_option("--steps-per-round", steps_per_round, "steps per variant per round")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--batch", config.batch, "sequences per batch")->check(CLI::PositiveNumber)->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (model == "deep-narrow") {
    // Its steps take about a second: fewer of them than the defaults above, unless asked.
    if (app.count("--rounds") > 0) deep_narrow.rounds = rounds;
    if (app.count("--warmup-rounds") > 0) deep_narrow.warmup_rounds = warmup_rounds;
    if (app.count("--steps-per-round") > 0) deep_narrow.steps_per_round = steps_per_round;
    deep_narrow.device = torch::Device(device == "cpu" ? torch::kCPU : torch::kCUDA);
    return keel::bench::run_deep_narrow_gpu_bench(deep_narrow);
  }

  if (!torch::cuda::is_available()) {
    std::puts("keel-bench-gpu: no CUDA device is available to this libtorch: nothing to measure");
    std::puts("{\"bench\":\"keel-bench-gpu\",\"cuda\":false}");
    return 0;
  }
  config.device = torch::Device(torch::kCUDA);
  config.bf16 = true;
  config.warmup_steps = 0;
  config.lr = 1e-4;
  if (model == "gpt2-small") {
    config.model = keel::demo::gpt2_small_shape();
    config.vocab = keel::demo::kGpt2Vocab;
  }

  std::vector<Variant> variants;
  auto add = [&](const std::string& name, bool rmsprop = false) -> Variant& {
    Variant v;
    v.name = name;
    keel::demo::TrainerConfig own = config;
    own.rmsprop = rmsprop;
    v.trainer = std::make_unique<keel::demo::Trainer>(own);
    variants.push_back(std::move(v));
    return variants.back();
  };
  add("plain").finish = [](Variant& v) { v.trainer->optimizer().step(); };
  add("fused").finish = fused_finish;
  add("keel_grads");
  add("keel_defaults");
  add("keel_full").watch_logits = true;
  add("naive").finish = naive_finish;
  // An optimizer with no fused kernel and no update rule: the probe decides on the host (one
  // wait) and, with the defaults, reports no update_ratio rather than copy the weights.
  add("plain_rmsprop", /*rmsprop=*/true);
  add("keel_rmsprop", /*rmsprop=*/true);
  add("foreach").finish = foreach_finish;

  int64_t params = 0, weight_bytes = 0;
  const auto tensors = variants[0].trainer->model()->parameters();
  for (const auto& p : tensors) {
    params += p.numel();
    weight_bytes += p.numel() * static_cast<int64_t>(p.element_size());
  }
  std::printf("keel-bench-gpu: %s on %s: %lld parameters in %zu tensors, batch %lld x %lld tokens, bf16 autocast\n",
              model.c_str(), torch::cuda::is_available() ? "cuda" : "?", static_cast<long long>(params), tensors.size(),
              static_cast<long long>(config.batch), static_cast<long long>(config.model.context));

  // One plain step each, so gradients and optimizer state exist; then each probe is attached
  // and stepped once, and the device memory it holds from then on is what it adds.
  int64_t step = 0;
  for (auto& v : variants) {
    if (!v.finish) v.finish = [](Variant& w) { w.trainer->optimizer().step(); };
    train_step(v, step);
  }
  ++step;
  torch::cuda::synchronize();
  for (auto& v : variants) {
    const bool probed = v.name.rfind("keel_", 0) == 0;
    if (!probed) continue;
    const int64_t before = device_bytes_in_use();
    keel::probe::ProbeOptions options;
    options.endpoint = "tcp://127.0.0.1:*";
    options.accept_commands = false;
    if (v.name == "keel_grads") {
      options.cadence[static_cast<int>(keel::wire::LayerMetric::kParamNorm)] = 0;
      options.cadence[static_cast<int>(keel::wire::LayerMetric::kUpdateRatio)] = 0;
    }
    v.probe = std::make_unique<keel::probe::Probe>(*v.trainer->model(), v.trainer->optimizer(), options);
    for (int k = 0; k < 2; ++k) train_step(v, step + k);
    torch::cuda::synchronize();
    v.extra_bytes = device_bytes_in_use() - before;
  }
  step += 2;

  SyncCounter counter;
  for (int round = 0; round < warmup_rounds + rounds; ++round) {
    for (size_t k = 0; k < variants.size(); ++k) {
      Variant& v = variants[(k + static_cast<size_t>(round)) % variants.size()];
      torch::cuda::synchronize();
      const int64_t syncs_before = counter.count;
      set_sync_debug(true);
      const auto start = Clock::now();
      for (int s = 0; s < steps_per_round; ++s) train_step(v, step + s);
      set_sync_debug(false);
      const int64_t syncs = counter.count - syncs_before;
      torch::cuda::synchronize();   // the round's time includes the GPU finishing its work
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
      if (round >= warmup_rounds) {
        v.step_ms.push_back(ms / steps_per_round);
        v.syncs += syncs;
        v.steps_counted += steps_per_round;
      }
    }
    step += steps_per_round;
  }

  // Each variant against the plain step of its own optimizer ("plain" or "plain_rmsprop").
  auto baseline_ms = [&](const Variant& v) {
    const std::string plain = v.name.find("rmsprop") != std::string::npos ? "plain_rmsprop" : "plain";
    for (const auto& b : variants) {
      if (b.name == plain) return median(b.step_ms);
    }
    return 0.0;
  };
  std::string json = "{\"bench\":\"keel-bench-gpu\",\"cuda\":true,\"model\":\"" + model +
                     "\",\"params\":" + std::to_string(params) + ",\"tensors\":" + std::to_string(tensors.size()) +
                     ",\"rounds\":" + std::to_string(rounds) + ",\"steps_per_round\":" + std::to_string(steps_per_round);
  std::printf("%-14s %9s %9s %12s %14s\n", "variant", "ms/step", "vs plain", "syncs/step", "extra device");
  std::printf("(the rmsprop variants against plain_rmsprop)\n");
  for (const auto& v : variants) {
    const double ms = median(v.step_ms);
    const double plain_ms = baseline_ms(v);
    const double overhead_pct = plain_ms > 0 ? (ms / plain_ms - 1.0) * 100.0 : 0.0;
    const double syncs = v.steps_counted > 0 ? static_cast<double>(v.syncs) / static_cast<double>(v.steps_counted) : 0.0;
    const double extra_pct = 100.0 * static_cast<double>(v.extra_bytes) / static_cast<double>(weight_bytes);
    std::printf("%-14s %9.2f %8.1f%% %12.1f %9.1f MB (%.1f%% of weights)\n", v.name.c_str(), ms, overhead_pct, syncs,
                static_cast<double>(v.extra_bytes) / 1e6, extra_pct);
    json += ",\"" + v.name + "_ms\":" + json_number(ms);
    if (v.name.rfind("plain", 0) != 0) json += ",\"" + v.name + "_overhead_pct\":" + json_number(overhead_pct);
    json += ",\"" + v.name + "_syncs_per_step\":" + json_number(syncs);
    if (v.probe) json += ",\"" + v.name + "_extra_device_pct\":" + json_number(extra_pct);
  }
  json += "}";
  std::puts(json.c_str());
  return 0;
}
