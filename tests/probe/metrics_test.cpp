// Every per-layer metric of DESIGN §2 against an independent double-precision reference, on a
// model with several layer types and both reduction paths (CPU fp32 fused; generic ATen).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "keel/probe/probe.hpp"
#include "quiet_options.hpp"
#include "reference_stats.hpp"

namespace {

using keel::wire::LayerMetric;

// Conv, norm, embedding, linear (fp32, fused path), a float64 linear (generic path), and a
// branch multiplied by zero so its gradients are exactly 0.
struct MixedNetImpl : torch::nn::Module {
  MixedNetImpl() {
    embed = register_module("embed", torch::nn::Embedding(10, 8));
    conv = register_module("conv", torch::nn::Conv1d(torch::nn::Conv1dOptions(8, 6, 3).padding(1)));
    norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({6})));
    dead = register_module("dead", torch::nn::Linear(6, 6));
    head = register_module("head", torch::nn::Linear(6, 4));
    wide = register_module("wide", torch::nn::Linear(4, 3));
    wide->to(torch::kDouble);
  }
  torch::Tensor forward(const torch::Tensor& tokens) {
    auto x = embed->forward(tokens).transpose(1, 2);           // [B, 8, T]
    x = conv->forward(x).transpose(1, 2);                       // [B, T, 6]
    x = norm->forward(torch::relu(x));
    x = x + 0.0 * dead->forward(x);
    auto y = head->forward(x);
    return wide->forward(y.to(torch::kDouble)).to(torch::kFloat);
  }
  torch::nn::Embedding embed{nullptr};
  torch::nn::Conv1d conv{nullptr};
  torch::nn::LayerNorm norm{nullptr};
  torch::nn::Linear dead{nullptr}, head{nullptr}, wide{nullptr};
};
TORCH_MODULE(MixedNet);

struct Snapshot {
  std::map<std::string, torch::Tensor> weights, grads;
};

Snapshot take(MixedNet& net) {
  Snapshot s;
  for (auto& p : net->named_parameters()) {
    s.weights[p.key()] = p.value().detach().clone();
    if (p.value().grad().defined()) s.grads[p.key()] = p.value().grad().detach().clone();
  }
  return s;
}

void backward(MixedNet& net, torch::optim::Optimizer& opt, keel::probe::Probe& probe, int64_t seed) {
  torch::manual_seed(seed);
  opt.zero_grad();
  auto tokens = torch::randint(0, 10, {4, 5}, torch::kLong);
  auto out = net->forward(tokens);
  probe.watch("logits", out);
  out.pow(2).mean().backward();
}

// `update_rel`: how close update_ratio must come to W_new - W_old. An update taken from the
// optimizer's rule is the step it computed, before fp32 rounded W_new (about 1e-4 apart where
// the update is 1e-5 of W).
void expect_metrics_match(MixedNet& net, const keel::probe::Probe& probe, const Snapshot& before, bool applied,
                          double update_rel = 1e-5) {
  const auto& record = probe.last_record();
  const auto& layers = probe.description().layers;
  ASSERT_EQ(record.layer_count, layers.size());
  size_t i = 0;
  for (auto& p : net->named_parameters()) {
    ASSERT_EQ(layers[i].name, p.key());
    const auto& grad = before.grads.at(p.key());
    const auto ref = keel::test::reference_grad(grad);
    SCOPED_TRACE(p.key());
    EXPECT_TRUE(keel::test::close_rel(record.layer_value(LayerMetric::kGradNorm, i), ref.norm));
    EXPECT_TRUE(keel::test::close_rel(record.layer_value(LayerMetric::kGradAbsmax, i), ref.absmax));
    EXPECT_EQ(record.layer_value(LayerMetric::kGradNonfinite, i), static_cast<float>(ref.nonfinite));
    EXPECT_TRUE(keel::test::close_rel(record.layer_value(LayerMetric::kGradZeroFrac, i), ref.zero_frac));
    const double param_norm = keel::test::reference_norm(before.weights.at(p.key()));
    EXPECT_TRUE(keel::test::close_rel(record.layer_value(LayerMetric::kParamNorm, i), param_norm));
    const double ratio = applied ? keel::test::reference_update_ratio(before.weights.at(p.key()), p.value()) : 0.0;
    if (param_norm > 0) {
      EXPECT_TRUE(keel::test::close_rel(record.layer_value(LayerMetric::kUpdateRatio, i), ratio, update_rel));
    }
    ++i;
  }
}

TEST(ProbeMetrics, EveryMetricMatchesDoubleReference) {
  torch::manual_seed(0);
  MixedNet net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  keel::probe::ProbeOptions options = keel::test::quiet();
  keel::probe::Probe probe(*net, opt, options);
  for (int64_t step = 0; step < 3; ++step) {
    backward(net, opt, probe, 100 + step);
    const auto before = take(net);
    const auto outcome = probe.step(torch::tensor(1.0));
    ASSERT_TRUE(outcome.applied);
    expect_metrics_match(net, probe, before, true);
  }
  // The zero-gradient branch reports grad_norm 0 and zero fraction 1.
  const auto& r = probe.last_record();
  const auto& layers = probe.description().layers;
  for (uint32_t i = 0; i < r.layer_count; ++i) {
    if (layers[i].name.rfind("dead.", 0) == 0) {
      EXPECT_EQ(r.layer_value(LayerMetric::kGradNorm, i), 0.0f);
      EXPECT_EQ(r.layer_value(LayerMetric::kGradZeroFrac, i), 1.0f);
    }
  }
}

// A plain SGD's updates are read off the gradient pass (no copy of W): per group lr, nothing
// for the layers the optimizer does not hold (norm), and back to the copy once momentum is on,
// where the update stops being -lr * g (its second step with momentum tells them apart).
// ProbeOptions::measure_in_backward changes where small gradients (and, under a plain SGD,
// their weights) are measured, not what: the records are the same, bit for bit.
TEST(ProbeMetrics, MeasuredInBackwardOrInThePassTheRecordsAreTheSame) {
  std::vector<std::vector<float>> values[2];
  std::vector<double> grad_norms[2];
  for (int in_backward = 0; in_backward < 2; ++in_backward) {
    torch::manual_seed(0);
    MixedNet net;
    torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1));
    keel::probe::ProbeOptions options = keel::test::quiet();
    options.measure_in_backward = in_backward == 1;
    keel::probe::Probe probe(*net, opt, options);
    for (int64_t step = 0; step < 3; ++step) {
      backward(net, opt, probe, 100 + step);
      ASSERT_TRUE(probe.step(torch::tensor(1.0)).applied);
      values[in_backward].push_back(probe.last_record().layer_values);
      grad_norms[in_backward].push_back(probe.last_record().grad_norm);
    }
  }
  EXPECT_EQ(values[0], values[1]);
  EXPECT_EQ(grad_norms[0], grad_norms[1]);
}

TEST(ProbeMetrics, PlainSgdUpdatesMatchTheReferenceAcrossGroupsAndATurnToMomentum) {
  torch::manual_seed(0);
  MixedNet net;
  std::vector<torch::Tensor> fast, slow;
  for (auto& p : net->named_parameters()) {
    if (p.key().rfind("norm.", 0) == 0) continue;
    (p.key().rfind("head.", 0) == 0 ? fast : slow).push_back(p.value());
  }
  torch::optim::SGD opt(fast, torch::optim::SGDOptions(0.1));
  opt.add_param_group(torch::optim::OptimizerParamGroup(slow, std::make_unique<torch::optim::SGDOptions>(0.03)));
  keel::probe::ProbeOptions options = keel::test::quiet();
  keel::probe::Probe probe(*net, opt, options);
  for (int64_t step = 0; step < 5; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    if (step == 2) {
      for (auto& group : opt.param_groups()) static_cast<torch::optim::SGDOptions&>(group.options()).momentum(0.9);
    }
    backward(net, opt, probe, 300 + step);
    const auto before = take(net);
    ASSERT_TRUE(probe.step(torch::tensor(1.0)).applied);
    expect_metrics_match(net, probe, before, true, /*update_rel=*/1e-3);
  }
}

// A model all in fp32 on the CPU under a plain SGD keeps neither a copy of W nor |W_new|^2
// between steps: each step reads W before its update. Weights written between steps are
// therefore seen as they are, and when momentum turns on the copy taken then must still be
// checked against such writes (the versions are remembered again from that step on).
TEST(ProbeMetrics, AWholeCpuModelUnderPlainSgdSeesWeightsWrittenBetweenSteps) {
  torch::manual_seed(0);
  torch::nn::Sequential net(torch::nn::Linear(6, 8), torch::nn::Tanh(), torch::nn::Linear(8, 3));
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.05));
  keel::probe::ProbeOptions options = keel::test::quiet();
  keel::probe::Probe probe(*net, opt, options);
  for (int64_t step = 0; step < 6; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    if (step == 3) static_cast<torch::optim::SGDOptions&>(opt.param_groups()[0].options()).momentum(0.9);
    if (step % 2 == 0) {
      // A write outside the step (a weight loaded in place).
      torch::NoGradGuard no_grad;
      net->parameters()[0].mul_(1.5);
    }
    opt.zero_grad();
    torch::manual_seed(400 + step);
    net->forward(torch::randn({4, 6})).pow(2).mean().backward();
    std::vector<torch::Tensor> before;
    for (const auto& p : net->parameters()) before.push_back(p.detach().clone());
    ASSERT_TRUE(probe.step(torch::tensor(1.0)).applied);
    const auto& record = probe.last_record();
    const auto params = net->parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      SCOPED_TRACE("layer " + std::to_string(i));
      EXPECT_TRUE(keel::test::close_rel(record.layer_value(LayerMetric::kParamNorm, i), keel::test::reference_norm(before[i])));
      EXPECT_TRUE(keel::test::close_rel(record.layer_value(LayerMetric::kUpdateRatio, i),
                                        keel::test::reference_update_ratio(before[i], params[i]), 1e-3));
    }
  }
}

// The copy an optimizer without an update rule needs is opt-in only on a device: on the CPU
// (host memory) RMSprop's update ratio is measured with the defaults, exactly.
TEST(ProbeMetrics, AnOptimizerWithoutRulesStillMeasuresUpdatesOnTheCpu) {
  torch::manual_seed(0);
  MixedNet net;
  torch::optim::RMSprop opt(net->parameters(), torch::optim::RMSpropOptions(1e-2));
  keel::probe::ProbeOptions options = keel::test::quiet();
  ASSERT_FALSE(options.snapshot_for_update_ratio);
  keel::probe::Probe probe(*net, opt, options);
  for (int64_t step = 0; step < 2; ++step) {
    backward(net, opt, probe, 200 + step);
    const auto before = take(net);
    ASSERT_TRUE(probe.step(torch::tensor(1.0)).applied);
    EXPECT_TRUE(probe.last_record().metric_mask & (1u << static_cast<int>(LayerMetric::kUpdateRatio)));
    expect_metrics_match(net, probe, before, true);
  }
}

TEST(ProbeMetrics, UpdateRatioStaysRightAcrossSkippedSteps) {
  // The update pass refreshes the snapshot for the next step; a skipped step must leave it
  // valid for the step after it.
  torch::manual_seed(2);
  MixedNet net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  keel::probe::ProbeOptions options = keel::test::quiet();
  keel::probe::Probe probe(*net, opt, options);
  for (int64_t step = 0; step < 6; ++step) {
    backward(net, opt, probe, 200 + step);
    if (step == 2) {
      torch::NoGradGuard no_grad;
      net->head->weight.mutable_grad().view({-1})[0] = std::numeric_limits<float>::quiet_NaN();
    }
    const auto before = take(net);
    const auto outcome = probe.step(torch::tensor(1.0));
    ASSERT_EQ(outcome.applied, step != 2);
    if (step != 2) expect_metrics_match(net, probe, before, true);
  }
}

TEST(ProbeMetrics, NonFiniteGradientsAreCountedAndPropagate) {
  torch::manual_seed(1);
  MixedNet net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1));
  keel::probe::ProbeOptions options = keel::test::quiet();
  options.skip_on_nonfinite = false;   // apply anyway, so update_ratio is checked too
  keel::probe::Probe probe(*net, opt, options);
  backward(net, opt, probe, 7);
  {
    torch::NoGradGuard no_grad;
    net->conv->weight.mutable_grad().view({-1})[3] = std::numeric_limits<float>::quiet_NaN();
    net->head->bias.mutable_grad()[1] = std::numeric_limits<float>::infinity();
    net->wide->weight.mutable_grad().view({-1})[0] = -std::numeric_limits<double>::infinity();
  }
  const auto before = take(net);
  const auto outcome = probe.step(torch::tensor(1.0));
  EXPECT_TRUE(outcome.applied);
  EXPECT_EQ(outcome.nonfinite_layers, 3);
  expect_metrics_match(net, probe, before, true);
  EXPECT_TRUE(std::isnan(probe.last_record().grad_norm));
}

TEST(ProbeMetrics, WatchedTensorStatsMatchReference) {
  MixedNet net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1));
  keel::probe::ProbeOptions options = keel::test::quiet();
  keel::probe::Probe probe(*net, opt, options);
  torch::manual_seed(3);
  auto logits = torch::randn({3, 4, 7}) * 5;
  auto logits64 = torch::randn({2, 5}, torch::kDouble);   // generic path
  probe.watch("logits", logits);
  probe.watch("scores", logits64);
  net->forward(torch::zeros({1, 2}, torch::kLong)).sum().backward();
  probe.step(torch::tensor(0.5));
  const auto& w = probe.last_record().watches;
  ASSERT_EQ(w.size(), 2u);
  for (int k = 0; k < 2; ++k) {
    auto t = (k == 0 ? logits : logits64).to(torch::kDouble);
    EXPECT_EQ(w[k].name, k == 0 ? "logits" : "scores");
    EXPECT_TRUE(keel::test::close_rel(w[k].absmax, t.abs().max().item<double>()));
    EXPECT_TRUE(keel::test::close_rel(w[k].rms, std::sqrt(t.square().mean().item<double>())));
    // Reference logsumexp by hand: max + log(sum(exp(x - max))) per row, then the mean.
    auto rows = t.reshape({-1, t.size(-1)});
    double z = 0;
    for (int64_t r = 0; r < rows.size(0); ++r) {
      const double m = rows[r].max().item<double>();
      z += m + std::log((rows[r] - m).exp().sum().item<double>());
    }
    EXPECT_TRUE(keel::test::close_rel(w[k].z, z / static_cast<double>(rows.size(0))));
    EXPECT_EQ(w[k].nonfinite, 0);
  }
  EXPECT_EQ(probe.description().watches, (std::vector<std::string>{"logits", "scores"}));
  EXPECT_EQ(probe.last_record().loss, 0.5);
}

TEST(ProbeMetrics, CadenceLeavesMetricsOutOfTheRecord) {
  MixedNet net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1));
  keel::probe::ProbeOptions options = keel::test::quiet();
  options.cadence[static_cast<int>(LayerMetric::kUpdateRatio)] = 2;
  options.cadence[static_cast<int>(LayerMetric::kGradZeroFrac)] = 0;
  keel::probe::Probe probe(*net, opt, options);
  for (int step = 0; step < 2; ++step) {
    backward(net, opt, probe, step);
    probe.step(torch::tensor(1.0));
    const auto& r = probe.last_record();
    EXPECT_EQ(r.metric_block(LayerMetric::kGradZeroFrac), -1);
    EXPECT_EQ(r.metric_block(LayerMetric::kUpdateRatio) >= 0, step == 0);
    EXPECT_EQ(r.layer_values.size(), static_cast<size_t>(__builtin_popcount(r.metric_mask)) * r.layer_count);
  }
}

TEST(ProbeMetrics, GlobalGradNormIsNotStaleWhenNoGradientPassRan) {
  MixedNet net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1));
  keel::probe::ProbeOptions options = keel::test::quiet();
  options.skip_on_nonfinite = false;   // no policy needs the gradient pass on odd steps
  for (int m = 0; m < 4; ++m) options.cadence[m] = 2;   // gradient metrics every other step
  keel::probe::Probe probe(*net, opt, options);
  backward(net, opt, probe, 1);
  probe.step(torch::tensor(1.0));
  EXPECT_TRUE(std::isfinite(probe.last_record().grad_norm));
  backward(net, opt, probe, 2);
  probe.step(torch::tensor(1.0));
  EXPECT_TRUE(std::isnan(probe.last_record().grad_norm));
  EXPECT_EQ(probe.last_record().metric_block(LayerMetric::kGradNorm), -1);
}

// A rank outside 0 .. world_size - 1 is refused at attach: the dashboard lays out and names
// ranks by it, so a typo must not pass for another rank.
TEST(ProbeAttach, ARankOutsideTheWorldIsRefused) {
  MixedNet net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1));
  auto attach_error = [&](int32_t rank, int32_t world_size) -> std::string {
    keel::probe::ProbeOptions options = keel::test::quiet();
    options.rank = rank;
    options.world_size = world_size;
    try {
      keel::probe::Probe probe(*net, opt, options);
    } catch (const keel::probe::AttachError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(attach_error(3, 4), "");
  EXPECT_NE(attach_error(4, 4).find("rank 4 is not in a world of 4"), std::string::npos);
  EXPECT_NE(attach_error(-1, 4).find("is not in a world"), std::string::npos);
  EXPECT_NE(attach_error(0, 0).find("is not in a world"), std::string::npos);
}

}  // namespace
