// The update rebuilt from the optimizer's state after its step (update_rules + update_math,
// the code the CUDA update pass runs), on the CPU, against the update libtorch's own AdamW, Adam
// and SGD really applied (W_new - W_old from a copy taken before the step), in float64.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cuda/update_math.hpp"
#include "optimizer_cases.hpp"
#include "reference_stats.hpp"
#include "front/libtorch_optimizer.hpp"
#include "reduce/update_rules.hpp"

namespace {

using keel::probe::LayerUpdateRule;
using keel::probe::LibtorchOptimizer;
using keel::probe::cuda::ElementType;
using keel::probe::cuda::UpdateAccumulator;

using keel::test::MakeOptimizer;

using keel::test::optimizer_cases;

UpdateAccumulator rebuilt(const torch::Tensor& weight, const LayerUpdateRule& rule) {
  const float* w = weight.data_ptr<float>();
  const float* first = rule.first.defined() ? rule.first.data_ptr<float>() : w;
  const float* second = rule.second.defined() ? rule.second.data_ptr<float>() : nullptr;
  return keel::probe::cuda::update_range<ElementType::kFloat32>(w, first, second, rule.coefficients, 0, weight.numel(), 0, 1);
}

double sumsq(const torch::Tensor& t) { return t.to(torch::kDouble).square().sum().item<double>(); }

TEST(UpdateRules, RebuiltUpdatesMatchWhatTheOptimizerApplied) {
  for (const auto& c : optimizer_cases()) {
    SCOPED_TRACE(c.name);
    torch::manual_seed(7);
    // The third sits out step 1 (no gradient, as an unused layer after zero_grad); the last
    // one never has a gradient.
    std::vector<torch::Tensor> params = {torch::randn({1000}), torch::randn({37}), torch::randn({5, 5}) * 0.01,
                                         torch::randn({8})};
    for (auto& p : params) p.set_requires_grad(true);
    auto optimizer = c.make(params);
    for (int step = 0; step < 3; ++step) {
      for (size_t i = 0; i + 1 < params.size(); ++i) params[i].mutable_grad() = torch::randn_like(params[i]) * 0.1;
      const bool sits_out = step == 1;
      if (sits_out) params[2].mutable_grad() = torch::Tensor();
      std::vector<torch::Tensor> before;
      for (const auto& p : params) before.push_back(p.detach().clone());
      optimizer->step();
      std::vector<LayerUpdateRule> rules;
      keel::probe::read_update_rules(LibtorchOptimizer(*optimizer), keel::probe::LayerIndex(params), rules);
      ASSERT_EQ(rules.size(), params.size());
      for (size_t i = 0; i < params.size(); ++i) {
        SCOPED_TRACE("step " + std::to_string(step) + " tensor " + std::to_string(i));
        const auto got = rebuilt(params[i].detach(), rules[i]);
        const torch::Tensor applied = params[i].detach().to(torch::kDouble) - before[i].to(torch::kDouble);
        EXPECT_TRUE(keel::test::close_rel(got.update_sumsq, sumsq(applied), 1e-4));
        EXPECT_TRUE(keel::test::close_rel(got.old_sumsq, sumsq(before[i]), 1e-6));
        EXPECT_TRUE(keel::test::close_rel(got.new_sumsq, sumsq(params[i].detach()), 1e-12));
        if (i + 1 == params.size()) {
          EXPECT_EQ(got.update_sumsq, 0.0) << "a tensor never stepped has no update";
        }
        if (i == 2 && sits_out) {
          EXPECT_EQ(got.update_sumsq, 0.0) << "a tensor without a gradient this step was not stepped";
        }
      }
    }
  }
}

TEST(UpdateRules, OnlyAdamWAdamAndSgdHaveRules) {
  std::vector<torch::Tensor> params = {torch::randn({4}, torch::requires_grad())};
  torch::optim::RMSprop rmsprop(params, torch::optim::RMSpropOptions(1e-2));
  torch::optim::AdamW adamw(params, torch::optim::AdamWOptions(1e-2));
  EXPECT_FALSE(keel::probe::has_update_rules(LibtorchOptimizer(rmsprop)));
  EXPECT_TRUE(keel::probe::has_update_rules(LibtorchOptimizer(adamw)));
  std::vector<LayerUpdateRule> rules;
  EXPECT_THROW(keel::probe::read_update_rules(LibtorchOptimizer(rmsprop), keel::probe::LayerIndex(params), rules), std::runtime_error);
}

TEST(UpdateRules, DecayThatErasesTheWeightsIsRefused) {
  std::vector<torch::Tensor> params = {torch::randn({4}, torch::requires_grad())};
  torch::optim::AdamW adamw(params, torch::optim::AdamWOptions(1.0).weight_decay(1.0));
  params[0].mutable_grad() = torch::ones({4});
  adamw.step();
  std::vector<LayerUpdateRule> rules;
  EXPECT_THROW(keel::probe::read_update_rules(LibtorchOptimizer(adamw), keel::probe::LayerIndex(params), rules), std::runtime_error);
}

// An optimizer built from a model that registers a submodule twice holds its tensors twice,
// and libtorch steps each twice: W -= lr * g, twice. One rule rebuilt half that update, and
// reported it as the update. Such an optimizer has no rules to go by.
TEST(UpdateRules, ATensorSteppedTwiceIsRefused) {
  torch::Tensor shared = torch::randn({4}, torch::requires_grad());
  torch::Tensor own = torch::randn({3}, torch::requires_grad());
  torch::optim::SGD twice({shared, own, shared}, torch::optim::SGDOptions(0.1));
  torch::optim::SGD once({shared, own}, torch::optim::SGDOptions(0.1));
  EXPECT_TRUE(keel::probe::steps_a_tensor_twice(LibtorchOptimizer(twice)));
  EXPECT_FALSE(keel::probe::steps_a_tensor_twice(LibtorchOptimizer(once)));

  shared.mutable_grad() = torch::ones({4});
  own.mutable_grad() = torch::ones({3});
  const torch::Tensor before = shared.detach().clone();
  twice.step();
  EXPECT_TRUE(torch::allclose(before - shared.detach(), torch::full({4}, 0.2))) << "libtorch stepped it twice";
  std::vector<LayerUpdateRule> rules;
  try {
    keel::probe::read_update_rules(LibtorchOptimizer(twice), keel::probe::LayerIndex({shared, own}), rules);
    ADD_FAILURE() << "rebuilt as one step";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("holds one tensor twice"), std::string::npos) << e.what();
  }
}

}  // namespace
