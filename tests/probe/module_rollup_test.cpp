// A wide model's step records (issue 30, part 2): per-layer values every layer_detail_every
// steps, each module's worst layer on the others, and every unsafe step in full.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "keel/probe/probe.hpp"
#include "layout/module_ranges.hpp"
#include "quiet_options.hpp"

namespace {

using keel::probe::plan_module_ranges;
using keel::wire::LayerMetric;
using keel::wire::ModuleRange;

std::vector<std::string> moe_names(int blocks, int experts) {
  std::vector<std::string> names{"embed.weight"};
  for (int b = 0; b < blocks; ++b) {
    const std::string block = "blocks." + std::to_string(b);
    names.push_back(block + ".norm.weight");
    names.push_back(block + ".attn.qkv.weight");
    for (int e = 0; e < experts; ++e) {
      for (const char* w : {"w1", "w2", "w3"}) names.push_back(block + ".experts." + std::to_string(e) + "." + w + ".weight");
    }
  }
  names.push_back("head.weight");
  names.push_back("scale");   // a parameter of the model itself
  return names;
}

std::vector<std::string> module_names(const std::vector<ModuleRange>& modules) {
  std::vector<std::string> out;
  for (const ModuleRange& m : modules) out.push_back(m.name);
  return out;
}

void expect_covers_in_order(const std::vector<ModuleRange>& modules, size_t layers) {
  uint32_t next = 0;
  for (const ModuleRange& m : modules) {
    EXPECT_EQ(m.first, next) << m.name;
    EXPECT_GT(m.count, 0u) << m.name;
    next = m.first + m.count;
  }
  EXPECT_EQ(next, layers);
}

TEST(ModuleRanges, AMixtureOfExpertsIsRolledUpAtTheDeepestDepthWithinTheTarget) {
  const auto names = moe_names(4, 64);   // 4 x (2 + 192) + 3 = 779 layers
  // Depth 3 has 4 x 3 modules (norm, attn, experts) + embed, head and the model's own: 15;
  // depth 4 has each expert apart (4 x 66 + 3 = 267).
  const auto coarse = plan_module_ranges(names, 100, 1000);
  expect_covers_in_order(coarse, names.size());
  EXPECT_EQ(coarse.size(), 15u);
  EXPECT_EQ(coarse[3].name, "blocks.0.experts");
  EXPECT_EQ(coarse[3].count, 192u);
  EXPECT_EQ(coarse.back().name, "") << "a parameter of the model itself is under the model";

  const auto fine = plan_module_ranges(names, 300, 1000);
  expect_covers_in_order(fine, names.size());
  EXPECT_EQ(fine[3].name, "blocks.0.experts.0");
  EXPECT_EQ(fine[3].count, 3u);
}

TEST(ModuleRanges, TooManyTopLevelModulesGiveTheTopLevelOrNone) {
  std::vector<std::string> names;
  for (int i = 0; i < 500; ++i) {
    names.push_back("l" + std::to_string(i) + ".weight");
    names.push_back("l" + std::to_string(i) + ".bias");
  }
  const auto top = plan_module_ranges(names, 100, 600);
  expect_covers_in_order(top, names.size());
  EXPECT_EQ(top.size(), 500u);
  EXPECT_TRUE(plan_module_ranges(names, 100, 400).empty()) << "rollups that save too little are not made";
}

TEST(ModuleRanges, APrefixSeenAgainLaterIsARangeOfItsOwn) {
  const std::vector<std::string> names{"a.x.weight", "b.weight", "a.y.weight"};
  const auto modules = plan_module_ranges(names, 10, 10);
  expect_covers_in_order(modules, names.size());
  EXPECT_EQ(module_names(modules), (std::vector<std::string>{"a.x", "b", "a.y"}));
}

// 3 blocks, each an attention Linear and an experts list of 4 Linear: 30 tensors.
struct RollupBlock : torch::nn::Module {
  RollupBlock() {
    attn = register_module("attn", torch::nn::Linear(6, 6));
    for (int e = 0; e < 4; ++e) experts->push_back(torch::nn::Linear(6, 6));
    register_module("experts", experts);
  }
  torch::Tensor forward(torch::Tensor x) {
    x = attn->forward(x);
    torch::Tensor sum = torch::zeros_like(x);
    for (const auto& expert : *experts) sum = sum + expert->as<torch::nn::Linear>()->forward(x);
    return sum;
  }
  torch::nn::Linear attn{nullptr};
  torch::nn::ModuleList experts;
};

struct Wide : torch::nn::Module {
  Wide() {
    for (int b = 0; b < 3; ++b) blocks.push_back(register_module("b" + std::to_string(b), std::make_shared<RollupBlock>()));
  }
  torch::Tensor forward(torch::Tensor x) {
    for (auto& block : blocks) x = torch::tanh(block->forward(x));
    return x;
  }
  std::vector<std::shared_ptr<RollupBlock>> blocks;
};

keel::probe::ProbeOptions wide_options() {
  auto o = keel::test::quiet();
  o.layer_detail_above = 8;
  o.layer_detail_every = 4;
  return o;
}

TEST(ModuleRollups, AWideModelSendsItsLayersEveryFewStepsAndEachModulesWorstLayerBetween) {
  torch::manual_seed(3);
  Wide model;
  torch::optim::SGD opt(model.parameters(), torch::optim::SGDOptions(0.01));
  keel::probe::Probe probe(model, opt, wide_options());
  const auto& modules = probe.description().modules;
  ASSERT_FALSE(modules.empty());
  expect_covers_in_order(modules, probe.description().layers.size());
  const auto params = model.parameters();

  for (int step = 0; step < 8; ++step) {
    opt.zero_grad();
    model.forward(torch::randn({5, 6})).pow(2).mean().backward();
    // Each layer's gradient norm as the probe will see it (SGD's step leaves the gradients).
    std::vector<double> norms;
    for (const auto& p : params) norms.push_back(p.grad().norm().item<double>());
    probe.step(torch::tensor(1.0));
    const auto& record = probe.last_record();
    SCOPED_TRACE("step " + std::to_string(step));
    if (step % 4 == 0) {
      EXPECT_EQ(record.metric_mask, keel::wire::kAllLayerMetrics);
      EXPECT_EQ(record.module_mask, 0u);
      EXPECT_TRUE(record.module_values.empty());
      continue;
    }
    EXPECT_EQ(record.metric_mask, 0u);
    EXPECT_TRUE(record.layer_values.empty());
    EXPECT_EQ(record.layer_count, params.size()) << "still the layout's layer count";
    ASSERT_EQ(record.module_mask, keel::wire::kAllLayerMetrics);
    ASSERT_EQ(record.module_count, modules.size());
    ASSERT_EQ(record.module_values.size(), modules.size() * keel::wire::kLayerMetricCount);
    const int block = record.module_block(LayerMetric::kGradNorm);
    for (size_t k = 0; k < modules.size(); ++k) {
      const auto first = norms.begin() + modules[k].first;
      const double worst = *std::max_element(first, first + modules[k].count);
      EXPECT_NEAR(record.module_values[block * modules.size() + k], worst, 1e-5 * worst) << modules[k].name;
    }
  }
}

TEST(ModuleRollups, AnUnsafeStepGoesOutPerLayerWhenItIsNotDue) {
  torch::manual_seed(4);
  Wide model;
  torch::optim::SGD opt(model.parameters(), torch::optim::SGDOptions(0.01));
  keel::probe::Probe probe(model, opt, wide_options());
  for (int step = 0; step < 3; ++step) {
    opt.zero_grad();
    model.forward(torch::randn({5, 6})).pow(2).mean().backward();
    if (step == 2) {
      torch::NoGradGuard no_grad;
      model.blocks[1]->experts[2]->as<torch::nn::Linear>()->weight.grad()[0][0] = std::numeric_limits<float>::quiet_NaN();
    }
    probe.step(torch::tensor(1.0));
  }
  const auto& record = probe.last_record();
  EXPECT_TRUE(record.skipped);
  EXPECT_EQ(record.metric_mask, keel::wire::kAllLayerMetrics) << "step 2 is not due, but it is unsafe";
  EXPECT_EQ(record.module_mask, 0u);
  const auto& layers = probe.description().layers;
  uint32_t nan_layer = 0;
  while (nan_layer < layers.size() && layers[nan_layer].name != "b1.experts.2.weight") ++nan_layer;
  ASSERT_LT(nan_layer, layers.size());
  EXPECT_EQ(record.layer_value(LayerMetric::kGradNonfinite, nan_layer), 1.0f);
}

TEST(ModuleRollups, ANarrowModelIsSentPerLayerEveryStep) {
  torch::manual_seed(5);
  Wide model;
  torch::optim::SGD opt(model.parameters(), torch::optim::SGDOptions(0.01));
  auto options = wide_options();
  options.layer_detail_above = 30;   // the model has 30: not more
  keel::probe::Probe probe(model, opt, options);
  EXPECT_TRUE(probe.description().modules.empty());
  opt.zero_grad();
  model.forward(torch::randn({5, 6})).pow(2).mean().backward();
  probe.step(torch::tensor(1.0));
  opt.zero_grad();
  model.forward(torch::randn({5, 6})).pow(2).mean().backward();
  probe.step(torch::tensor(1.0));
  EXPECT_EQ(probe.last_record().metric_mask, keel::wire::kAllLayerMetrics);
}

}  // namespace
