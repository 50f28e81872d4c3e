// A failure inside the probe (issue 12, item 1): it must never change training for the worse.
// Without a loss scaler the update is applied as libtorch would; with one the gradients may
// still be scaled (or half unscaled), so the step ends as the scaler's overflow: skipped, the
// scale backed off (once for a run of failures, not at every step). Either way the failure is counted on the wire (StepRecord::probe_errors)
// and told as a "probe_error" event with what went wrong, and the step still has its record.
// The failure here is a layer on the meta device: it has no data, so reading any reduction of
// it throws, and no fix to the probe can make it readable.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>

#include "keel/probe/grad_scaler.hpp"
#include "keel/probe/probe.hpp"
#include "quiet_options.hpp"
#include "two_layer_net.hpp"

namespace {

struct HalfReadableImpl : torch::nn::Module {
  HalfReadableImpl() {
    fc = register_module("fc", torch::nn::Linear(3, 2));
    ghost = register_parameter("ghost", torch::zeros({4}, torch::TensorOptions().device(torch::kMeta)));
  }
  torch::nn::Linear fc{nullptr};
  torch::Tensor ghost;
};
TORCH_MODULE(HalfReadable);

using keel::test::quiet;

// Gradients as a backward scaled by `scale` would leave them: fc's all 0.5 once unscaled.
void set_grads(HalfReadable& net, double scale) {
  torch::NoGradGuard no_grad;
  for (auto& p : net->fc->parameters()) p.mutable_grad() = torch::full_like(p, 0.5 * scale);
  net->ghost.mutable_grad() = torch::zeros_like(net->ghost);
}

size_t count_events(const keel::probe::Probe& probe, const std::string& kind) {
  size_t n = 0;
  for (const auto& e : probe.last_events()) n += e.kind == kind;
  return n;
}

TEST(ProbeFailure, WithoutAScalerTheUpdateIsAppliedAndTheFailureIsPublished) {
  HalfReadable net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1));
  keel::probe::Probe probe(*net, opt, quiet());
  const auto before = net->fc->weight.detach().clone();
  set_grads(net, 1.0);
  const auto outcome = probe.step(torch::tensor(2.0));
  EXPECT_TRUE(outcome.applied);
  EXPECT_TRUE(torch::allclose(net->fc->weight, before - 0.05)) << "applied as libtorch would";
  const auto& record = probe.last_record();
  EXPECT_EQ(record.step, 0) << "the failed step still has its record";
  EXPECT_EQ(record.probe_errors, 1u);
  EXPECT_EQ(record.metric_mask, 0u) << "no layer values it could not measure";
  EXPECT_DOUBLE_EQ(record.loss, 2.0);
  ASSERT_EQ(count_events(probe, "probe_error"), 1u);
  for (const auto& e : probe.last_events()) {
    if (e.kind == "probe_error") {
      EXPECT_NE(e.detail.find("update applied"), std::string::npos) << e.detail;
    }
  }

  set_grads(net, 1.0);
  probe.step(torch::tensor(2.0));
  EXPECT_EQ(probe.last_record().probe_errors, 2u) << "cumulative";
}

// The half-readable net, stepped by SGD through a probe with a loss scaler: every step fails.
struct FailingWithScaler {
  FailingWithScaler() { probe.use_scaler(&scaler); }
  HalfReadable net;
  torch::optim::SGD opt{net->parameters(), torch::optim::SGDOptions(0.1)};
  keel::probe::Probe probe{*net, opt, quiet()};
  keel::probe::GradScaler scaler;
};

TEST(ProbeFailure, WithAScalerTheStepEndsAsAnOverflow) {
  FailingWithScaler rig;
  auto& [net, opt, probe, scaler] = rig;
  const float scale = scaler.scale_value();
  const auto before = net->fc->weight.detach().clone();
  set_grads(net, scale);
  const auto outcome = probe.step(torch::tensor(2.0));
  EXPECT_FALSE(outcome.applied) << "the still-scaled gradients were not stepped";
  EXPECT_EQ(outcome.skip_reason, "scaler");
  EXPECT_TRUE(keel::test::bit_identical(net->fc->weight.detach(), before));
  EXPECT_EQ(scaler.scale_value(), scale / 2) << "backed off as after an overflow";
  EXPECT_EQ(scaler.skipped_total(), 1);
  const auto& record = probe.last_record();
  EXPECT_EQ(record.probe_errors, 1u);
  EXPECT_TRUE(record.skipped);
  ASSERT_TRUE(record.scaler.has_value());
  EXPECT_TRUE(record.scaler->found_inf);
  ASSERT_EQ(count_events(probe, "probe_error"), 1u);
  for (const auto& e : probe.last_events()) {
    if (e.kind == "probe_error") {
      EXPECT_NE(e.detail.find("skipped as an overflow"), std::string::npos) << e.detail;
    }
  }
}

// A probe that fails at every step skips every step, but backs the scale off only once: 200
// halvings would take the scale to zero, and training would stay dead after keel recovered.
TEST(ProbeFailure, AProbeThatKeepsFailingBacksTheScaleOffOnce) {
  FailingWithScaler rig;
  auto& [net, opt, probe, scaler] = rig;
  const float scale = scaler.scale_value();
  for (int step = 0; step < 200; ++step) {
    set_grads(net, scaler.scale_value());
    ASSERT_FALSE(probe.step(torch::tensor(2.0)).applied) << "step " << step;
  }
  EXPECT_EQ(scaler.scale_value(), scale / 2);
  EXPECT_EQ(scaler.skipped_total(), 200);
  EXPECT_EQ(probe.last_record().probe_errors, 200u);
}

// The user's optimizer failing is not the probe's failure: its exception reaches the caller.
// A caller who goes on (a retry after running out of memory) scales the next batch again, and
// the probe must unscale it: the scaler is not left marked as unscaled by the failed step.
class SgdThatThrowsOnce : public torch::optim::SGD {
 public:
  using SGD::SGD;
  torch::Tensor step(LossClosure closure = nullptr) override {
    if (throw_next) {
      throw_next = false;
      throw std::runtime_error("CUDA out of memory (as the caller's optimizer might say)");
    }
    return SGD::step(closure);
  }
  bool throw_next = false;
};

TEST(ProbeFailure, AnOptimizerThatThrowsIsTheCallersAndTheNextStepIsStillUnscaled) {
  torch::nn::Linear net(3, 2);
  SgdThatThrowsOnce opt(net->parameters(), torch::optim::SGDOptions(0.1));
  keel::probe::Probe probe(*net, opt, quiet());
  keel::probe::GradScaler scaler;
  probe.use_scaler(&scaler);
  const float scale = scaler.scale_value();
  const auto scaled_grads = [&] {
    torch::NoGradGuard no_grad;
    for (auto& p : net->parameters()) p.mutable_grad() = torch::full_like(p, 0.5 * scale);
  };
  scaled_grads();
  opt.throw_next = true;
  EXPECT_THROW(probe.step(torch::tensor(1.0)), std::runtime_error);
  EXPECT_FALSE(scaler.unscaled());

  const auto before = net->weight.detach().clone();
  scaled_grads();
  const auto outcome = probe.step(torch::tensor(1.0));
  EXPECT_TRUE(outcome.applied) << outcome.skip_reason;
  EXPECT_TRUE(torch::allclose(net->weight, before - 0.05)) << "stepped with the gradients unscaled";
  EXPECT_EQ(probe.last_record().probe_errors, 0u);
}

}  // namespace
