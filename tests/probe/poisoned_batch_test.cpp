// The 3 AM case with finite gradients: a corrupt target makes a small conv net's loss overflow
// to Inf while every gradient stays finite, near 1e29. The fp32 sums of squares used to
// overflow, so the norms read Inf, the non-finite count read 0, and the update ruined the
// weights; first_nonfinite came a step later and the automatic dump held corrupt weights.
// Here the step is skipped, its event names the cause and the layer at that step, the norms are
// finite, the dump holds the weights from before it, and training goes on with finite losses.
// The same runs through the generic (ATen) reduction path with a float64 model, and the other
// ways a step can be unsafe with finite gradient values are checked one by one.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "keel/probe/probe.hpp"
#include "quiet_options.hpp"
#include "temp_dir.hpp"
#include "two_layer_net.hpp"

namespace {

using keel::wire::LayerMetric;

// conv -> conv -> linear head without a bias, so the layer that backward reaches first, and
// the one the poisoned target hits hardest, is unambiguously head.weight.
struct SmallConvNetImpl : torch::nn::Module {
  SmallConvNetImpl() {
    conv1 = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 4, 3).padding(1)));
    conv2 = register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(4, 8, 3).stride(2).padding(1)));
    head = register_module("head", torch::nn::Linear(torch::nn::LinearOptions(8 * 4 * 4, 2).bias(false)));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto h = torch::relu(conv1->forward(x));
    h = torch::relu(conv2->forward(h));
    return head->forward(h.flatten(1));
  }
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::Linear head{nullptr};
};
TORCH_MODULE(SmallConvNet);

constexpr int64_t kPoisonedStep = 5;
constexpr double kPoisonedTarget = 1e29;

using keel::test::quiet;

// One batch's loss, after its backward; `poisoned` gives the batch a corrupt target.
torch::Tensor forward_backward(SmallConvNet& net, torch::optim::Optimizer& opt, int64_t seed, bool poisoned,
                               torch::Dtype dtype) {
  torch::manual_seed(seed);
  opt.zero_grad();
  const auto x = torch::randn({4, 1, 8, 8}, dtype);
  auto target = torch::randn({4, 2}, dtype);
  if (poisoned) target.fill_(kPoisonedTarget);
  // The loss in float32, as a mixed-precision trainer computes it: (1e29)^2 overflows there.
  auto loss = torch::mse_loss(net->forward(x).to(torch::kFloat), target.to(torch::kFloat));
  loss.backward();
  return loss.detach();
}

std::vector<torch::Tensor> weights_of(SmallConvNet& net) {
  std::vector<torch::Tensor> out;
  for (const auto& p : net->parameters()) out.push_back(p.detach().clone());
  return out;
}

double reference_global_norm(SmallConvNet& net) {
  double sumsq = 0;
  for (const auto& p : net->parameters()) sumsq += p.grad().to(torch::kDouble).square().sum().item<double>();
  return std::sqrt(sumsq);
}

const keel::wire::Event* find_event(const std::vector<keel::wire::Event>& events, const std::string& kind) {
  for (const auto& e : events) {
    if (e.kind == kind) return &e;
  }
  return nullptr;
}

// Trains kPoisonedStep clean steps, the poisoned one, then ten more; checks every promise.
void run_poisoned_batch(torch::Dtype dtype, const std::filesystem::path& dump_dir) {
  torch::manual_seed(0);
  SmallConvNet net;
  net->to(dtype);
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  auto options = quiet();
  options.dump_on_nonfinite = true;
  options.dump_dir = dump_dir.string();
  std::vector<torch::Tensor> before_poison;
  {
    keel::probe::Probe probe(*net, opt, options);
    for (int64_t s = 0; s < kPoisonedStep; ++s) {
      forward_backward(net, opt, s, false, dtype);
      ASSERT_TRUE(probe.step(torch::tensor(1.0)).applied) << "clean step " << s;
    }
    before_poison = weights_of(net);

    const auto loss = forward_backward(net, opt, kPoisonedStep, true, dtype);
    ASSERT_TRUE(std::isinf(loss.item<double>())) << "the poisoned loss should overflow to Inf";
    double largest_grad = 0;
    for (const auto& p : net->parameters()) {
      ASSERT_TRUE(torch::isfinite(p.grad()).all().item<bool>()) << "every gradient value stays finite";
      largest_grad = std::max(largest_grad, p.grad().abs().max().item<double>());
    }
    ASSERT_GT(largest_grad, 1e27);
    const double want_norm = reference_global_norm(net);

    const auto outcome = probe.step(loss);
    EXPECT_FALSE(outcome.applied);
    EXPECT_EQ(outcome.skip_reason, "nonfinite");
    EXPECT_EQ(outcome.nonfinite_cause, "overflowing grad norm + non-finite loss");
    EXPECT_TRUE(keel::test::all_identical(weights_of(net), before_poison)) << "the poisoned update was applied";

    const auto& record = probe.last_record();
    EXPECT_EQ(record.step, kPoisonedStep);
    EXPECT_TRUE(record.skipped);
    EXPECT_TRUE(std::isinf(record.loss));
    ASSERT_TRUE(std::isfinite(record.grad_norm)) << "the global norm overflowed";
    EXPECT_NEAR(record.grad_norm / want_norm, 1.0, 1e-6);
    for (uint32_t l = 0; l < record.layer_count; ++l) {
      EXPECT_TRUE(std::isfinite(record.layer_value(LayerMetric::kGradNorm, l))) << "layer " << l;
      EXPECT_EQ(record.layer_value(LayerMetric::kGradNonfinite, l), 0.0f) << "layer " << l;
      EXPECT_TRUE(std::isfinite(record.layer_value(LayerMetric::kParamNorm, l))) << "layer " << l;
      EXPECT_EQ(record.layer_value(LayerMetric::kUpdateRatio, l), 0.0f) << "layer " << l;
    }

    const auto* first = find_event(probe.last_events(), "first_nonfinite");
    ASSERT_NE(first, nullptr) << "no first_nonfinite at the poisoned step";
    EXPECT_EQ(first->step, kPoisonedStep);
    EXPECT_EQ(first->layer, "head.weight");
    EXPECT_NE(first->detail.find("overflowing grad norm"), std::string::npos) << first->detail;
    EXPECT_NE(first->detail.find("non-finite loss"), std::string::npos) << first->detail;
    EXPECT_NE(first->detail.find("first in backward order to overflow: head.weight"), std::string::npos)
        << first->detail;
    ASSERT_TRUE(first->cause);
    EXPECT_EQ(first->cause->kind, "batch") << first->cause->sentence;
    EXPECT_EQ(first->cause->module, "head") << first->cause->sentence;
    EXPECT_EQ(probe.last_record().cause, "batch");
    const auto* skip = find_event(probe.last_events(), "skip");
    ASSERT_NE(skip, nullptr);
    EXPECT_EQ(skip->detail, "update skipped: nonfinite (overflowing grad norm + non-finite loss)");

    for (int64_t s = kPoisonedStep + 1; s < kPoisonedStep + 11; ++s) {
      const auto later = forward_backward(net, opt, s, false, dtype);
      EXPECT_TRUE(std::isfinite(later.item<double>())) << "loss at step " << s;
      const auto o = probe.step(later);
      EXPECT_TRUE(o.applied) << "step " << s << ": " << o.skip_reason;
    }
  }  // the probe's destructor finishes the dump

  // The automatic dump is of the poisoned step, before its (skipped) update.
  const auto dumped = dump_dir / ("step-" + std::to_string(kPoisonedStep) + "-nonfinite") / "model.pt";
  ASSERT_TRUE(std::filesystem::exists(dumped)) << dumped;
  SmallConvNet fresh;
  fresh->to(dtype);
  torch::load(fresh, dumped.string());
  EXPECT_TRUE(keel::test::all_identical(weights_of(fresh), before_poison));
}

TEST(PoisonedBatch, FiniteHugeGradientsAreSkippedNamedAndDumpedIntact) {
  keel::test::TempDir tmp("poisoned-fp32");
  run_poisoned_batch(torch::kFloat, tmp.path());
}

TEST(PoisonedBatch, TheGenericReductionPathDoesNotOverflowEither) {
  // A float64 model's tensors go through ATen ops on their device rather than the fused kernels.
  keel::test::TempDir tmp("poisoned-fp64");
  run_poisoned_batch(torch::kDouble, tmp.path());
}

TEST(PoisonedBatch, AnOverflowingNormWithAFiniteLossIsSkipped) {
  keel::test::TwoLayer net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1));
  keel::probe::Probe probe(*net, opt, quiet());
  opt.zero_grad();
  // Finite loss (1e20 x a bounded sum), gradients near 1e20: their fp32 squares overflow.
  auto loss = net->forward(torch::ones({4, 5})).sum() * 1e20;
  loss.backward();
  const auto outcome = probe.step(loss.detach());
  EXPECT_FALSE(outcome.applied);
  EXPECT_EQ(outcome.nonfinite_cause, "overflowing grad norm");
  EXPECT_TRUE(std::isfinite(probe.last_record().grad_norm));
  EXPECT_GT(probe.last_record().grad_norm, 1.8e19);
  ASSERT_FALSE(probe.last_events().empty());
  EXPECT_EQ(probe.last_events()[0].kind, "first_nonfinite");
  // Backward reaches fc2 first; which of its weight and bias hooks fires first is autograd's.
  EXPECT_EQ(probe.last_events()[0].layer.rfind("fc2.", 0), 0u) << probe.last_events()[0].layer;
  EXPECT_NE(probe.last_events()[0].detail.find("first in backward order to overflow: fc2."), std::string::npos)
      << probe.last_events()[0].detail;
}

// The loss is NaN while the gradients are ordinary: the NaN was born in the forward pass (or
// came with the batch), which the gradients do not show, so no layer is named as its origin.
TEST(PoisonedBatch, ANonFiniteLossWithOrdinaryGradientsIsSkippedAndToldAsTheForwardPass) {
  keel::test::TwoLayer net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1));
  keel::probe::Probe probe(*net, opt, quiet());
  opt.zero_grad();
  net->forward(torch::ones({4, 5})).pow(2).mean().backward();
  const auto outcome = probe.step(torch::tensor(std::numeric_limits<float>::quiet_NaN()));
  EXPECT_FALSE(outcome.applied);
  EXPECT_EQ(outcome.skip_reason, "nonfinite");
  EXPECT_EQ(outcome.nonfinite_cause, "non-finite loss");
  ASSERT_FALSE(probe.last_events().empty());
  const keel::wire::Event& event = probe.last_events()[0];
  EXPECT_EQ(event.kind, "first_nonfinite");
  EXPECT_EQ(event.layer, "");
  EXPECT_NE(event.detail.find("loss nan"), std::string::npos) << event.detail;
  EXPECT_EQ(event.detail.find("fc"), std::string::npos) << event.detail;
  ASSERT_TRUE(event.cause);
  EXPECT_EQ(event.cause->kind, "forward");
  EXPECT_EQ(probe.last_record().cause, "forward");
}

// With several ranks the loss is this rank's own while the gradients are the job's: a
// non-finite loss with safe gradients is reported and the update applied, as every other rank
// applies it (skipping here alone would leave the replicas apart). Gradients that are unsafe
// are skipped as ever: they are the same on every rank.
TEST(PoisonedBatch, ARanksOwnNonFiniteLossWithSafeGradientsIsReportedAndApplied) {
  torch::manual_seed(5);
  keel::test::TwoLayer net, twin;
  for (size_t i = 0; i < net->parameters().size(); ++i) {
    torch::NoGradGuard no_grad;
    twin->parameters()[i].copy_(net->parameters()[i]);
  }
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1));
  torch::optim::SGD twin_opt(twin->parameters(), torch::optim::SGDOptions(0.1));
  auto options = quiet();
  options.rank = 1;
  options.world_size = 2;
  keel::probe::Probe probe(*net, opt, options);
  for (auto* m : {&net, &twin}) (*m)->forward(torch::ones({4, 5})).pow(2).mean().backward();
  twin_opt.step();
  const auto outcome = probe.step(torch::tensor(std::numeric_limits<float>::infinity()));
  EXPECT_TRUE(outcome.applied);
  EXPECT_EQ(outcome.skip_reason, "");
  EXPECT_EQ(outcome.nonfinite_cause, "non-finite loss");
  for (size_t i = 0; i < net->parameters().size(); ++i) {
    EXPECT_TRUE(torch::equal(net->parameters()[i], twin->parameters()[i])) << "parameter " << i;
  }
  ASSERT_FALSE(probe.last_events().empty());
  EXPECT_EQ(probe.last_events()[0].kind, "first_nonfinite");
  EXPECT_NE(probe.last_events()[0].detail.find("update applied"), std::string::npos) << probe.last_events()[0].detail;

  opt.zero_grad();
  net->forward(torch::ones({4, 5})).pow(2).mean().backward();
  keel::test::poison(net->fc1->weight);
  const auto poisoned = probe.step(torch::tensor(std::numeric_limits<float>::infinity()));
  EXPECT_FALSE(poisoned.applied);
  EXPECT_EQ(poisoned.skip_reason, "nonfinite");
}

TEST(PoisonedBatch, TheSpikePolicyCatchesANonFiniteNormEvenDuringWarmUp) {
  keel::test::TwoLayer net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1));
  auto options = quiet();
  options.skip_on_nonfinite = false;
  options.skip_on_spike = true;
  keel::probe::Probe probe(*net, opt, options);
  opt.zero_grad();
  net->forward(torch::ones({4, 5})).pow(2).mean().backward();
  ASSERT_TRUE(probe.step(torch::tensor(1.0)).applied);
  opt.zero_grad();
  net->forward(torch::ones({4, 5})).pow(2).mean().backward();
  keel::test::poison(net->fc1->weight);
  const auto outcome = probe.step(torch::tensor(1.0));
  EXPECT_FALSE(outcome.applied);
  EXPECT_EQ(outcome.skip_reason, "spike");
  EXPECT_FALSE(std::isnan(net->fc1->weight[0][0].item<float>()));
}

}  // namespace
