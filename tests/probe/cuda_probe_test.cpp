// The probe on a CUDA device, end to end: the fused gradient pass against a float64 reference
// (fp32, bf16 and fp64 layers), a skipped non-finite step with bit-identical weights and
// optimizer state, the scaler's unscale fused into the pass, and the host waits per step.
// Built where libtorch has CUDA; every test reports as skipped (with the reason) where there is
// no CUDA device.
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "keel/probe/grad_scaler.hpp"
#include "keel/probe/probe.hpp"
#include "keel/probe/torch_compat.hpp"
#include "reference_stats.hpp"
#include "two_layer_net.hpp"

namespace {

using keel::wire::LayerMetric;

#define SKIP_WITHOUT_DEVICE()                                                          \
  do {                                                                                 \
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device available to libtorch"; \
  } while (0)

// One layer of each element type the fused pass reads natively.
struct MixedPrecisionNetImpl : torch::nn::Module {
  MixedPrecisionNetImpl() {
    fc = register_module("fc", torch::nn::Linear(5, 64));
    mid = register_module("mid", torch::nn::Linear(64, 32));
    out = register_module("out", torch::nn::Linear(32, 3));
    to(torch::kCUDA);
    mid->to(torch::kBFloat16);
    out->to(torch::kDouble);
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto h = torch::tanh(fc->forward(x)).to(torch::kBFloat16);
    h = torch::tanh(mid->forward(h)).to(torch::kDouble);
    return out->forward(h).to(torch::kFloat);
  }
  torch::nn::Linear fc{nullptr}, mid{nullptr}, out{nullptr};
};
TORCH_MODULE(MixedPrecisionNet);

torch::Tensor backward(MixedPrecisionNet& net, torch::optim::Optimizer& opt, int64_t seed, double loss_scale = 1.0) {
  torch::manual_seed(seed);
  opt.zero_grad();
  auto x = torch::randn({16, 5}, torch::TensorOptions().device(torch::kCUDA));
  auto loss = net->forward(x).pow(2).mean();
  (loss * loss_scale).backward();
  return loss.detach();
}

std::vector<torch::Tensor> grads_on_host(MixedPrecisionNet& net) {
  std::vector<torch::Tensor> out;
  for (auto& p : net->parameters()) out.push_back(p.grad().detach().to(torch::kCPU));
  return out;
}

std::vector<torch::Tensor> on_host(const std::vector<torch::Tensor>& tensors) {
  std::vector<torch::Tensor> out;
  for (const auto& t : tensors) out.push_back(t.to(torch::kCPU));
  return out;
}

void expect_grad_metrics(const keel::probe::Probe& probe, const std::vector<torch::Tensor>& grads, double divide_by) {
  const auto& record = probe.last_record();
  ASSERT_EQ(record.layer_count, grads.size());
  for (size_t i = 0; i < grads.size(); ++i) {
    SCOPED_TRACE(probe.description().layers[i].name);
    const auto ref = keel::test::reference_grad(grads[i].to(torch::kDouble) / divide_by);
    EXPECT_TRUE(keel::test::close_rel(record.layer_value(LayerMetric::kGradNorm, i), ref.norm, 1e-6));
    EXPECT_TRUE(keel::test::close_rel(record.layer_value(LayerMetric::kGradAbsmax, i), ref.absmax, 1e-6));
    EXPECT_EQ(record.layer_value(LayerMetric::kGradNonfinite, i), static_cast<float>(ref.nonfinite));
    EXPECT_TRUE(keel::test::close_rel(record.layer_value(LayerMetric::kGradZeroFrac, i), ref.zero_frac, 1e-6));
  }
}

int64_t adamw_step_count(torch::optim::Optimizer& opt, const torch::Tensor& p) {
  return static_cast<torch::optim::AdamWParamState&>(*opt.state().at(keel::probe::compat::optimizer_state_key(p))).step();
}

int64_t adam_step_count(torch::optim::Optimizer& opt, const torch::Tensor& p) {
  return static_cast<torch::optim::AdamParamState&>(*opt.state().at(keel::probe::compat::optimizer_state_key(p))).step();
}

keel::probe::ProbeOptions quiet_options() {
  keel::probe::ProbeOptions options;
  options.endpoint = "";
  options.dump_on_nonfinite = false;
  return options;
}

// Counts c10's "synchronizing CUDA operation" warnings while sync debug mode is on.
class SyncCounter : public c10::WarningHandler {
 public:
  SyncCounter() : previous_(c10::WarningUtils::get_warning_handler()) {
    c10::WarningUtils::set_warning_handler(this);
    c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_WARN);
  }
  ~SyncCounter() override {
    c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_DISABLED);
    c10::WarningUtils::set_warning_handler(previous_);
  }
  void process(const c10::Warning& warning) override {
    if (warning.msg().find("synchroniz") != std::string::npos) ++count;
  }
  int64_t count = 0;

 private:
  c10::WarningHandler* previous_;
};

TEST(CudaProbe, GradientMetricsOfEveryElementTypeMatchAFloat64Reference) {
  SKIP_WITHOUT_DEVICE();
  MixedPrecisionNet net;
  torch::optim::AdamW opt(net->parameters(), torch::optim::AdamWOptions(1e-3));
  keel::probe::Probe probe(*net, opt, quiet_options());
  for (int64_t step = 0; step < 3; ++step) {
    auto loss = backward(net, opt, step);
    const auto grads = grads_on_host(net);
    probe.step(loss);
    // A deferred step (AdamW on one device): its record is made when it settles.
    probe.settle();
    const auto& outcome = probe.last_settled();
    ASSERT_EQ(outcome.step, step);
    ASSERT_TRUE(outcome.applied) << outcome.skip_reason;
    expect_grad_metrics(probe, grads, 1.0);
    EXPECT_DOUBLE_EQ(probe.last_record().loss, loss.item<double>());
  }
}

// Steps `loss` (the caller has already spoiled what it wants spoiled), settles the step, and
// checks that the device skipped it as non-finite for `cause`, leaving the weights and the
// AdamW state bit-identical. The device skips (ATen's fused AdamW reads the verdict the
// gradient pass wrote); the host hears of it when the step settles.
void expect_skipped_on_device(MixedPrecisionNet& net, torch::optim::AdamW& opt, keel::probe::Probe& probe,
                              const torch::Tensor& loss, const std::string& cause) {
  const auto before = on_host(keel::test::params_and_adamw_state(*net, opt));
  EXPECT_FALSE(probe.step(loss).settled);
  probe.settle();
  const auto& outcome = probe.last_settled();
  EXPECT_FALSE(outcome.applied);
  EXPECT_EQ(outcome.skip_reason, "nonfinite");
  EXPECT_EQ(outcome.nonfinite_cause, cause);
  EXPECT_TRUE(keel::test::all_identical(before, on_host(keel::test::params_and_adamw_state(*net, opt))));
}

TEST(CudaProbe, NonfiniteStepIsSkippedWithBitIdenticalWeightsAndOptimizerState) {
  SKIP_WITHOUT_DEVICE();
  MixedPrecisionNet net;
  torch::optim::AdamW opt(net->parameters(), torch::optim::AdamWOptions(1e-3));
  keel::probe::Probe probe(*net, opt, quiet_options());
  probe.step(backward(net, opt, 1));
  auto loss = backward(net, opt, 2);
  keel::test::poison(net->mid->weight);
  const int64_t step_count = adamw_step_count(opt, net->mid->weight);
  expect_skipped_on_device(net, opt, probe, loss, "non-finite gradient values");
  EXPECT_EQ(probe.last_settled().step, 1);
  EXPECT_EQ(probe.last_settled().nonfinite_layers, 1);
  EXPECT_EQ(adamw_step_count(opt, net->mid->weight), step_count) << "a skipped step is not counted once settled";
  bool named = false;
  for (const auto& e : probe.last_events()) named = named || (e.kind == "first_nonfinite" && e.layer == "mid.weight");
  EXPECT_TRUE(named) << "first_nonfinite names mid.weight";
}

// The verdict's other two causes, decided on the device too: a poisoned batch (every value
// finite, the norm above 1.8e19) and a non-finite loss.
TEST(CudaProbe, APoisonedBatchAndANonfiniteLossAreSkippedOnTheDevice) {
  SKIP_WITHOUT_DEVICE();
  MixedPrecisionNet net;
  torch::optim::AdamW opt(net->parameters(), torch::optim::AdamWOptions(1e-3));
  keel::probe::Probe probe(*net, opt, quiet_options());
  probe.step(backward(net, opt, 1));

  auto loss = backward(net, opt, 2);
  {
    torch::NoGradGuard no_grad;
    net->fc->weight.mutable_grad().fill_(1e19);   // 320 values: sum of squares 3.2e40
  }
  expect_skipped_on_device(net, opt, probe, loss, "overflowing grad norm");

  loss = backward(net, opt, 3);
  expect_skipped_on_device(net, opt, probe, loss * std::numeric_limits<float>::quiet_NaN(), "non-finite loss");

  probe.step(backward(net, opt, 4));
  probe.settle();
  EXPECT_TRUE(probe.last_settled().applied) << "a clean step after them is applied";
}

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
      if (step > 0) EXPECT_EQ(syncs.count, 0) << "step " << step;
    }
    EXPECT_FALSE(outcome.settled) << "step " << step;
    if (step == kPoisoned) {
      EXPECT_TRUE(keel::test::all_identical(before, on_host(keel::test::params_and_adamw_state(*net, opt))))
          << "the device skipped the poisoned update";
    }
    if (step == 0) continue;
    // Step - 1 has settled: its outcome, its record and the scaler's host values.
    const auto& settled = probe.last_settled();
    ASSERT_EQ(settled.step, step - 1);
    EXPECT_EQ(settled.applied, step - 1 != kPoisoned) << "step " << step - 1;
    if (step - 1 == kPoisoned) EXPECT_EQ(settled.skip_reason, "scaler");
    EXPECT_EQ(scaler.scale_value(), scaled_with[step]) << "after step " << step - 1;
    const auto& record = probe.last_record();
    ASSERT_TRUE(record.scaler.has_value());
    EXPECT_EQ(record.scaler->found_inf, step - 1 == kPoisoned);
    EXPECT_EQ(record.scaler->scale, scaled_with[step]);
    if (step - 1 == 1) expect_grad_metrics(probe, step1_grads, scaled_with[1]);
  }
  probe.settle();
  EXPECT_EQ(scaler.skipped_total(), 1);
  EXPECT_EQ(adamw_step_count(opt, net->fc->weight), 6) << "seven steps, one skipped";
}

// update_ratio and param_norm of AdamW, Adam and SGD (momentum) steps on the device, against
// the weights before and after in float64: the update is rebuilt from the optimizer's state.
TEST(CudaProbe, UpdateRatioIsRebuiltFromTheOptimizerStateAndMatchesAFloat64Reference) {
  SKIP_WITHOUT_DEVICE();
  using MakeOptimizer = std::function<std::unique_ptr<torch::optim::Optimizer>(std::vector<torch::Tensor>)>;
  const std::vector<std::pair<std::string, MakeOptimizer>> optimizers = {
      {"AdamW", [](auto p) { return std::make_unique<torch::optim::AdamW>(p, torch::optim::AdamWOptions(1e-2)); }},
      {"Adam", [](auto p) { return std::make_unique<torch::optim::Adam>(p, torch::optim::AdamOptions(1e-2).weight_decay(0.1)); }},
      {"SGD", [](auto p) { return std::make_unique<torch::optim::SGD>(p, torch::optim::SGDOptions(0.1).momentum(0.9)); }},
  };
  for (const auto& [name, make] : optimizers) {
    SCOPED_TRACE(name);
    MixedPrecisionNet net;
    auto opt = make(net->parameters());
    keel::probe::Probe probe(*net, *opt, quiet_options());
    for (int64_t step = 0; step < 3; ++step) {
      auto loss = backward(net, *opt, 10 + step);
      const auto before = on_host(net->parameters());
      probe.step(loss);
      probe.settle();
      ASSERT_EQ(probe.last_settled().step, step);
      ASSERT_TRUE(probe.last_settled().applied);
      const auto after = on_host(net->parameters());
      const auto& record = probe.last_record();
      for (size_t i = 0; i < before.size(); ++i) {
        SCOPED_TRACE(probe.description().layers[i].name + " step " + std::to_string(step));
        // W_old is rebuilt from W_new, which was rounded to the weight's type: for bf16 that
        // rounding (up to 2^-9 of each element) bounds the weight norm's error. An update of
        // 0.3% of the weights is as small as that rounding, so the update the optimizer meant
        // (what the rebuild gives) and the bf16 one it left differ by several percent (6.4%
        // seen on an H100 with SGD).
        const bool bf16 = before[i].scalar_type() == torch::kBFloat16;
        EXPECT_TRUE(keel::test::close_rel(record.layer_value(LayerMetric::kParamNorm, i),
                                          keel::test::reference_norm(before[i]), bf16 ? 4e-3 : 1e-6));
        EXPECT_TRUE(keel::test::close_rel(record.layer_value(LayerMetric::kUpdateRatio, i),
                                          keel::test::reference_update_ratio(before[i], after[i]), bf16 ? 0.15 : 1e-4));
      }
    }
  }
}

// What a probe holds on the device: `net` (width x width layers on the GPU) takes a plain step,
// then the probe attaches and takes three; the allocator's count after them, over before.
struct DeviceFootprint {
  int64_t extra_bytes = 0;
  int64_t weight_bytes = 0;
  uint32_t metric_mask = 0;   // of the probe's last record
};

DeviceFootprint probe_footprint(torch::nn::Sequential& net, torch::optim::Optimizer& opt, int64_t width,
                                const keel::probe::ProbeOptions& options) {
  auto step_once = [&](keel::probe::Probe* probe) {
    opt.zero_grad();
    auto loss = net->forward(torch::randn({64, width}, torch::TensorOptions().device(torch::kCUDA))).pow(2).mean();
    loss.backward();
    if (probe) {
      probe->step(loss.detach());
    } else {
      opt.step();
    }
  };
  auto in_use = [] {
    torch::cuda::synchronize();
    return c10::cuda::CUDACachingAllocator::getDeviceStats(c10::cuda::current_device()).allocated_bytes[0].current;
  };
  DeviceFootprint f;
  for (const auto& p : net->parameters()) f.weight_bytes += p.numel() * static_cast<int64_t>(p.element_size());
  step_once(nullptr);
  const int64_t before = in_use();
  keel::probe::Probe probe(*net, opt, options);
  for (int k = 0; k < 3; ++k) step_once(&probe);
  probe.settle();
  f.extra_bytes = in_use() - before;
  f.metric_mask = probe.last_record().metric_mask;
  return f;
}

// With the defaults (every metric every step), the probe holds no copy of the weights: what it
// adds on the device (tables, partial sums) stays far below 5% of them.
TEST(CudaProbe, DefaultsAddLessThanFivePercentOfTheWeightsOnTheDevice) {
  SKIP_WITHOUT_DEVICE();
  torch::nn::Sequential net(torch::nn::Linear(1024, 1024), torch::nn::Tanh(), torch::nn::Linear(1024, 1024),
                            torch::nn::Tanh(), torch::nn::Linear(1024, 1024));
  net->to(torch::kCUDA);
  torch::optim::AdamW opt(net->parameters(), torch::optim::AdamWOptions(1e-3));
  const DeviceFootprint f = probe_footprint(net, opt, 1024, quiet_options());
  EXPECT_LT(f.extra_bytes, f.weight_bytes / 20)
      << "the probe holds " << f.extra_bytes << " bytes on the device for " << f.weight_bytes << " bytes of weights";
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

// Watched tensors the fused kernel has no rows for ([0, n]) or refuses (a strided slice,
// as logits[:, -1]) cost the training thread no wait either, and are measured.
TEST(CudaProbe, EmptyAndStridedWatchesAreMeasuredWithNoHostWait) {
  SKIP_WITHOUT_DEVICE();
  MixedPrecisionNet net;
  torch::optim::AdamW opt(net->parameters(), torch::optim::AdamWOptions(1e-3));
  keel::probe::Probe probe(*net, opt, quiet_options());
  probe.step(backward(net, opt, 5));
  const auto cuda = torch::TensorOptions().device(torch::kCUDA);
  const auto empty = torch::randn({0, 100}, cuda);
  const auto logits = torch::randn({4, 16, 300}, cuda) * 3;
  const auto last = logits.select(1, -1);   // [4, 300], rows 16 x 300 apart
  ASSERT_FALSE(last.is_contiguous());
  auto loss = backward(net, opt, 6);
  torch::cuda::synchronize();
  {
    SyncCounter syncs;
    probe.watch("empty", empty);
    probe.watch("last", last);
    probe.step(loss);
    EXPECT_EQ(syncs.count, 0);
  }
  probe.settle();
  const auto& watches = probe.last_record().watches;
  ASSERT_EQ(watches.size(), 2u);
  EXPECT_EQ(watches[0].name, "empty");
  EXPECT_EQ(watches[0].absmax, 0.0f);
  EXPECT_EQ(watches[0].rms, 0.0f);
  EXPECT_EQ(watches[0].nonfinite, 0);
  EXPECT_EQ(watches[0].z, 0.0f);
  const auto x = last.to(torch::kCPU).to(torch::kDouble);
  EXPECT_TRUE(keel::test::close_rel(watches[1].absmax, x.abs().max().item<double>(), 1e-7));
  EXPECT_TRUE(keel::test::close_rel(watches[1].rms, std::sqrt(x.square().mean().item<double>()), 1e-6));
  EXPECT_TRUE(keel::test::close_rel(watches[1].z, x.logsumexp(-1).mean().item<double>(), 1e-5));
}

// A layer the device passes refuse (here a frozen, transposed weight) needs its snapshot before
// the step: such a step is not deferred, and the layer's norm is measured, not left stale.
TEST(CudaProbe, ALayerTheDevicePassesRefuseKeepsTheUpdateMeasuredOnTheHost) {
  SKIP_WITHOUT_DEVICE();
  MixedPrecisionNet net;
  const auto frozen = net->register_parameter(
      "frozen", torch::randn({6, 3}, torch::TensorOptions().device(torch::kCUDA)).t(), /*requires_grad=*/false);
  ASSERT_FALSE(frozen.is_contiguous());
  torch::optim::AdamW opt(net->parameters(), torch::optim::AdamWOptions(1e-3));
  keel::probe::Probe probe(*net, opt, quiet_options());
  size_t layer = 0;
  while (layer < probe.description().layers.size() && probe.description().layers[layer].name != "frozen") ++layer;
  ASSERT_LT(layer, probe.description().layers.size());
  for (int64_t step = 0; step < 2; ++step) {
    const auto outcome = probe.step(backward(net, opt, 20 + step));
    EXPECT_TRUE(outcome.settled) << "step " << step;
    const auto& record = probe.last_record();
    EXPECT_TRUE(keel::test::close_rel(record.layer_value(LayerMetric::kParamNorm, layer),
                                      keel::test::reference_norm(frozen.to(torch::kCPU)), 1e-6));
    EXPECT_EQ(record.layer_value(LayerMetric::kUpdateRatio, layer), 0.0f);
  }
}

// A decision the device cannot take makes the step wait once for its results: here a dump on
// non-finite gradients with nothing to skip them, which must be taken before the update (a
// scaler is the other). One host wait per step, no more.
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
    EXPECT_EQ(syncs.count, 1) << "step " << step;
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

// A watched CUDA tensor goes through the fused watch kernel: absmax, rms, non-finite count and
// mean log-sum-exp over the last dimension against float64, for bf16 and fp32 logits, and a
// NaN among them counted and announced.
TEST(CudaProbe, WatchedLogitsMatchAFloat64Reference) {
  SKIP_WITHOUT_DEVICE();
  MixedPrecisionNet net;
  torch::optim::AdamW opt(net->parameters(), torch::optim::AdamWOptions(1e-3));
  keel::probe::Probe probe(*net, opt, quiet_options());
  for (const auto type : {torch::kBFloat16, torch::kFloat}) {
    for (const bool poisoned : {false, true}) {
      auto logits = (torch::randn({3, 50, 2001}, torch::TensorOptions().device(torch::kCUDA)) * 5).to(type);
      if (poisoned) logits.view({-1})[4321] = std::numeric_limits<float>::quiet_NaN();
      auto loss = backward(net, opt, 30);
      probe.watch("logits", logits);
      probe.step(loss);
      probe.settle();
      const auto& watches = probe.last_record().watches;
      ASSERT_EQ(watches.size(), 1u);
      const auto& w = watches[0];
      const auto x = logits.to(torch::kCPU).to(torch::kDouble);
      const auto finite = x.masked_fill(x.isnan(), 0.0);
      SCOPED_TRACE(std::string(type == torch::kFloat ? "fp32" : "bf16") + (poisoned ? " with a NaN" : ""));
      EXPECT_EQ(w.nonfinite, poisoned ? 1 : 0);
      if (poisoned) {
        EXPECT_TRUE(std::isnan(w.absmax));
        EXPECT_TRUE(std::isnan(w.z)) << "a NaN row makes the mean log-sum-exp NaN";
        bool announced = false;
        for (const auto& e : probe.last_events()) announced = announced || e.kind == "first_nonfinite_watch";
        EXPECT_TRUE(announced);
      } else {
        EXPECT_TRUE(keel::test::close_rel(w.absmax, x.abs().max().item<double>(), 1e-7));
        EXPECT_TRUE(keel::test::close_rel(w.rms, std::sqrt(finite.square().mean().item<double>()), 1e-6));
        EXPECT_TRUE(keel::test::close_rel(w.z, x.logsumexp(-1).mean().item<double>(), 1e-5));
      }
    }
  }
}

// An optimizer with no rule to rebuild its update (RMSprop) would need a copy of the weights
// on the device: with the defaults the probe reports no update_ratio and holds no copy; with
// snapshot_for_update_ratio it measures the update and holds the copy.
TEST(CudaProbe, WithoutAnUpdateRuleTheCopyOfTheWeightsIsOptIn) {
  SKIP_WITHOUT_DEVICE();
  for (const bool opt_in : {false, true}) {
    SCOPED_TRACE(opt_in ? "snapshot_for_update_ratio" : "defaults");
    torch::nn::Sequential net(torch::nn::Linear(512, 512), torch::nn::Tanh(), torch::nn::Linear(512, 512));
    net->to(torch::kCUDA);
    torch::optim::RMSprop opt(net->parameters(), torch::optim::RMSpropOptions(1e-3));
    auto options = quiet_options();
    options.snapshot_for_update_ratio = opt_in;
    const DeviceFootprint f = probe_footprint(net, opt, 512, options);
    EXPECT_EQ((f.metric_mask >> static_cast<int>(LayerMetric::kUpdateRatio)) & 1u, opt_in ? 1u : 0u);
    if (opt_in) {
      EXPECT_GE(f.extra_bytes, f.weight_bytes) << "the copy of the weights";
    } else {
      EXPECT_LT(f.extra_bytes, f.weight_bytes / 20) << f.extra_bytes << " bytes held for " << f.weight_bytes << " bytes of weights";
    }
  }
}

// The fused step is libtorch's step in ATen's fused arithmetic: a twin model stepped by
// libtorch itself ends with the same weights to fp32 rounding, and the same state and counts.
TEST(CudaProbe, FusedStepsMatchLibtorchsOwnAndKeepItsState) {
  SKIP_WITHOUT_DEVICE();
  using MakeOptimizer = std::function<std::unique_ptr<torch::optim::Optimizer>(std::vector<torch::Tensor>)>;
  const std::vector<std::pair<std::string, MakeOptimizer>> optimizers = {
      {"AdamW", [](auto p) { return std::make_unique<torch::optim::AdamW>(p, torch::optim::AdamWOptions(1e-2).weight_decay(0.1)); }},
      {"Adam", [](auto p) { return std::make_unique<torch::optim::Adam>(p, torch::optim::AdamOptions(1e-2).weight_decay(0.1)); }},
      {"SGD", [](auto p) { return std::make_unique<torch::optim::SGD>(p, torch::optim::SGDOptions(0.05).momentum(0.9)); }},
  };
  for (const auto& [name, make] : optimizers) {
    SCOPED_TRACE(name);
    torch::manual_seed(7);
    torch::nn::Sequential ours(torch::nn::Linear(16, 32), torch::nn::Tanh(), torch::nn::Linear(32, 4));
    torch::nn::Sequential twin(torch::nn::Linear(16, 32), torch::nn::Tanh(), torch::nn::Linear(32, 4));
    ours->to(torch::kCUDA);
    twin->to(torch::kCUDA);
    {
      torch::NoGradGuard no_grad;
      for (size_t i = 0; i < ours->parameters().size(); ++i) twin->parameters()[i].copy_(ours->parameters()[i]);
    }
    auto opt = make(ours->parameters());
    auto twin_opt = make(twin->parameters());
    keel::probe::Probe probe(*ours, *opt, quiet_options());
    for (int64_t step = 0; step < 6; ++step) {
      const auto x = torch::randn({8, 16}, torch::TensorOptions().device(torch::kCUDA));
      opt->zero_grad();
      twin_opt->zero_grad();
      auto loss = ours->forward(x).pow(2).mean();
      loss.backward();
      twin->forward(x).pow(2).mean().backward();
      probe.step(loss.detach());
      twin_opt->step();
    }
    probe.settle();
    for (size_t i = 0; i < ours->parameters().size(); ++i) {
      EXPECT_TRUE(torch::allclose(ours->parameters()[i], twin->parameters()[i], 1e-5, 1e-6)) << "parameter " << i;
    }
    if (name != "SGD") {
      for (const auto& p : ours->parameters()) {
        EXPECT_EQ(name == "AdamW" ? adamw_step_count(*opt, p) : adam_step_count(*opt, p), 6);
      }
    }
  }
}

// The model moves to the GPU after the probe attached on the CPU (issue 12, item 2): the
// CPU kernels used to read device pointers (a segfault on the training thread). The probe
// plans its layers again at the next step, measures them on the device against a float64
// reference, and re-describes the run.
TEST(CudaProbe, AModelMovedToTheGpuAfterAttachIsMeasuredThere) {
  SKIP_WITHOUT_DEVICE();
  torch::manual_seed(0);
  keel::test::TwoLayer net;
  torch::optim::AdamW opt(net->parameters(), torch::optim::AdamWOptions(1e-3));
  keel::probe::Probe probe(*net, opt, quiet_options());
  EXPECT_EQ(probe.description().device, "cpu");
  net->to(torch::kCUDA);
  for (int64_t step = 0; step < 3; ++step) {
    opt.zero_grad();
    auto loss = net->forward(torch::randn({4, 5}, torch::TensorOptions().device(torch::kCUDA))).pow(2).mean();
    loss.backward();
    std::vector<torch::Tensor> grads;
    for (auto& p : net->parameters()) grads.push_back(p.grad().detach().to(torch::kCPU));
    probe.step(loss.detach());
    probe.settle();
    ASSERT_EQ(probe.last_settled().step, step);
    EXPECT_TRUE(probe.last_settled().applied) << probe.last_settled().skip_reason;
    EXPECT_EQ(probe.last_record().probe_errors, 0u);
    const auto& record = probe.last_record();
    ASSERT_EQ(record.layer_count, grads.size());
    for (size_t i = 0; i < grads.size(); ++i) {
      const auto ref = keel::test::reference_grad(grads[i].to(torch::kDouble));
      EXPECT_TRUE(keel::test::close_rel(record.layer_value(LayerMetric::kGradNorm, static_cast<uint32_t>(i)), ref.norm, 1e-5));
    }
  }
  EXPECT_EQ(probe.description().device, "cuda:0");
}

}  // namespace
