// The model's floating-point buffers are watched: BatchNorm's running statistics are in the
// run description and measured every step, and a poisoned batch that makes them non-finite
// while every gradient stays finite is an event naming the buffer at that step, and a dump.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "quiet_options.hpp"
#include "temp_dir.hpp"

namespace {

namespace fs = std::filesystem;
using keel::test::quiet;
using keel::test::TempDir;

// A discriminator's shape: Linear, BatchNorm, a non-linearity, Linear.
struct NormNetImpl : torch::nn::Module {
  NormNetImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(4, 8));
    bn = register_module("bn", torch::nn::BatchNorm1d(8));
    fc2 = register_module("fc2", torch::nn::Linear(8, 1));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc2(torch::relu(bn(fc1(x)))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  torch::nn::BatchNorm1d bn{nullptr};
};
TORCH_MODULE(NormNet);

// One training step's forward and backward on a batch scaled by `scale`.
torch::Tensor forward_backward(NormNet& net, torch::optim::Optimizer& opt, int step, double scale = 1.0) {
  torch::manual_seed(step);
  opt.zero_grad();
  const torch::Tensor loss = net->forward(torch::randn({16, 4}) * scale).square().mean();
  loss.backward();
  return loss;
}

size_t index_of(const std::vector<std::string>& names, const std::string& name) {
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return i;
  }
  ADD_FAILURE() << name << " is not among the buffers";
  return 0;
}

std::vector<keel::wire::Event> events_of_kind(const keel::probe::Probe& probe, const std::string& kind) {
  std::vector<keel::wire::Event> out;
  for (const auto& e : probe.last_events()) {
    if (e.kind == kind) out.push_back(e);
  }
  return out;
}

TEST(Buffers, FloatBuffersAreDescribedAndMeasuredEveryStep) {
  NormNet net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.01));
  keel::probe::Probe probe(*net, opt, quiet());
  // num_batches_tracked is an integer: a count, not a statistic that can be NaN.
  EXPECT_EQ(probe.description().buffers, (std::vector<std::string>{"bn.running_mean", "bn.running_var"}));
  for (int step = 0; step < 3; ++step) {
    probe.step(forward_backward(net, opt, step));
    const auto& absmax = probe.last_record().buffer_absmax;
    ASSERT_EQ(absmax.size(), 2u);
    EXPECT_FLOAT_EQ(absmax[0], net->bn->running_mean.abs().max().item<float>());
    EXPECT_FLOAT_EQ(absmax[1], net->bn->running_var.abs().max().item<float>());
  }
  EXPECT_TRUE(events_of_kind(probe, "nonfinite_buffer").empty());
}

TEST(Buffers, APoisonedBatchIsReportedByBufferNameAtItsStepWhileGradientsStayFinite) {
  NormNet net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.01));
  keel::probe::Probe probe(*net, opt, quiet());
  const size_t var = index_of(probe.description().buffers, "bn.running_var");
  constexpr int kPoisoned = 4;
  std::vector<keel::wire::Event> reported;
  for (int step = 0; step < 8; ++step) {
    // 1e30 inputs: the batch variance overflows fp32, so BatchNorm divides by Inf (outputs and
    // gradients stay finite) and running_var becomes Inf for good.
    const torch::Tensor loss = forward_backward(net, opt, step, step == kPoisoned ? 1e30 : 1.0);
    const keel::probe::StepOutcome outcome = probe.step(loss);
    const auto& record = probe.last_record();
    if (step == kPoisoned) {
      EXPECT_EQ(outcome.nonfinite_layers, 0) << "the scenario wants finite gradients";
      EXPECT_TRUE(outcome.applied) << "a skip cannot undo a buffer the forward pass wrote";
    }
    ASSERT_EQ(record.buffer_absmax.size(), 2u);
    EXPECT_EQ(std::isfinite(record.buffer_absmax[var]), step < kPoisoned) << "step " << step;
    for (const auto& e : events_of_kind(probe, "nonfinite_buffer")) reported.push_back(e);
  }
  ASSERT_EQ(reported.size(), 1u) << "once, when the buffer turns non-finite, not at every step it stays so";
  EXPECT_EQ(reported[0].step, kPoisoned);
  EXPECT_EQ(reported[0].layer, "bn.running_var");
  EXPECT_NE(reported[0].detail.find("bn.running_var (Inf)"), std::string::npos) << reported[0].detail;
  EXPECT_NE(reported[0].detail.find("skipping the update does not undo"), std::string::npos) << reported[0].detail;
}

TEST(Buffers, ANanBufferIsNamedAndTheOthersListed) {
  NormNet net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.01));
  keel::probe::Probe probe(*net, opt, quiet());
  probe.step(forward_backward(net, opt, 0));
  {
    torch::NoGradGuard no_grad;
    net->bn->running_mean[3] = std::numeric_limits<float>::quiet_NaN();
    net->bn->running_var[0] = -std::numeric_limits<float>::infinity();
  }
  probe.step(forward_backward(net, opt, 1));
  const auto& absmax = probe.last_record().buffer_absmax;
  ASSERT_EQ(absmax.size(), 2u);
  EXPECT_TRUE(std::isnan(absmax[0])) << "running_mean holds a NaN";
  EXPECT_TRUE(std::isinf(absmax[1]) && absmax[1] > 0) << "max |b| of -Inf is +Inf";
  const auto reported = events_of_kind(probe, "nonfinite_buffer");
  ASSERT_EQ(reported.size(), 1u);
  EXPECT_EQ(reported[0].layer, "bn.running_mean");
  EXPECT_NE(reported[0].detail.find("bn.running_mean (NaN); also in bn.running_var (Inf)"), std::string::npos)
      << reported[0].detail;
}

TEST(Buffers, ANonFiniteBufferDumpsTheModel) {
  TempDir tmp("buffers-dump");
  keel::probe::ProbeOptions options = quiet();
  options.model = "discriminator";
  options.dump_on_nonfinite = true;
  options.dump_dir = (tmp.path() / "dumps").string();
  NormNet net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.01));
  keel::probe::Probe probe(*net, opt, options);
  const fs::path expected = tmp.path() / "dumps" / "step-2-nonfinite_buffer-discriminator";
  // The dump is written by a thread of its own while training goes on.
  for (int step = 0; step < 300 && !fs::exists(expected / "model.pt"); ++step) {
    probe.step(forward_backward(net, opt, step, step == 2 ? 1e30 : 1.0));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(fs::exists(expected / "model.pt"));
}

// Buffers of other types and layouts are measured too (ATen's ops where the fused pass does
// not read them), and a model registering one later is followed.
TEST(Buffers, OtherDtypesAndABufferAddedLaterAreFollowed) {
  NormNet net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.01));
  keel::probe::Probe probe(*net, opt, quiet());
  probe.step(forward_backward(net, opt, 0));
  EXPECT_EQ(probe.last_record().buffer_absmax.size(), 2u);
  net->register_buffer("ema", torch::tensor({1.0, -6.5, 2.0}, torch::kDouble));
  net->register_buffer("strided", torch::arange(12, torch::kFloat).reshape({3, 4}).t());
  probe.step(forward_backward(net, opt, 1));
  const auto& description = probe.description();
  ASSERT_EQ(description.buffers.size(), 4u);
  const auto& absmax = probe.last_record().buffer_absmax;
  ASSERT_EQ(absmax.size(), 4u);
  EXPECT_FLOAT_EQ(absmax[index_of(description.buffers, "ema")], 6.5f);
  EXPECT_FLOAT_EQ(absmax[index_of(description.buffers, "strided")], 11.0f);
  const auto changed = events_of_kind(probe, "layout_changed");
  ASSERT_EQ(changed.size(), 1u);
  EXPECT_NE(changed[0].detail.find("(2 watched before, 4 now)"), std::string::npos) << changed[0].detail;
}

// A causal attention mask of -inf is non-finite by design: a buffer that holds NaN/Inf when the
// probe first sees it is not watched, and never reported.
TEST(Buffers, ABufferNonFiniteFromTheStartIsAMaskNotAnAlarm) {
  NormNet net;
  net->register_buffer("causal_mask", torch::full({4, 4}, -std::numeric_limits<float>::infinity()).triu(1));
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.01));
  keel::probe::Probe probe(*net, opt, quiet());
  EXPECT_EQ(probe.description().buffers, (std::vector<std::string>{"bn.running_mean", "bn.running_var"}));
  for (int step = 0; step < 3; ++step) {
    probe.step(forward_backward(net, opt, step));
    EXPECT_EQ(probe.last_record().buffer_absmax.size(), 2u);
    EXPECT_TRUE(events_of_kind(probe, "nonfinite_buffer").empty());
    EXPECT_TRUE(events_of_kind(probe, "layout_changed").empty());
  }
}

TEST(Buffers, AModelWithoutBuffersSendsNone) {
  torch::nn::Linear net(3, 2);
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.01));
  keel::probe::Probe probe(*net, opt, quiet());
  opt.zero_grad();
  const torch::Tensor loss = net->forward(torch::ones({2, 3})).sum();
  loss.backward();
  probe.step(loss);
  EXPECT_TRUE(probe.description().buffers.empty());
  EXPECT_TRUE(probe.last_record().buffer_absmax.empty());
}

}  // namespace
