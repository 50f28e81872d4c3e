// FusedOptimizerStep on the CPU, where libtorch 2.4 and later have ATen's fused kernels: the
// same class the probe's deferred step drives on a CUDA device, its state bookkeeping checked
// on machines without a GPU. Against a twin stepped by libtorch itself: the weights to fp32
// rounding, the state libtorch would hold (counts, moments, buffers, and torch::save/load of
// it), and a skipped step that leaves weights and state bit for bit as they were, the state
// a first step would have created included. Skipped, with the reason, on older libtorch.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "front/fused_step.hpp"
#include "optimizer_cases.hpp"
#include "keel/probe/torch_compat.hpp"

namespace {

using keel::probe::FusedOptimizerStep;
using keel::test::MakeOptimizer;

#define SKIP_WITHOUT_CPU_FUSED_KERNELS()                                                                      \
  do {                                                                                                        \
    if (!KEEL_TORCH_HAS_CPU_FUSED_OPTIMIZERS) GTEST_SKIP() << "this libtorch has no fused optimizer kernels for the CPU (2.4 and later have them)"; \
  } while (0)

using keel::test::optimizer_cases;

// Parameters of two element types (one fused call each), the same values for every call.
std::vector<torch::Tensor> parameters() {
  torch::manual_seed(3);
  return {torch::randn({8, 4}).requires_grad_(), torch::randn({4}).requires_grad_(),
          torch::randn({4, 3}, torch::kDouble).requires_grad_()};
}

// The gradients of step `step`, the same for every set of parameters; `poison` puts a NaN in.
void set_gradients(const std::vector<torch::Tensor>& params, int64_t step, bool poison = false) {
  torch::manual_seed(100 + step);
  for (const auto& p : params) {
    p.mutable_grad() = torch::randn(p.sizes(), p.options().requires_grad(false));
  }
  if (poison) params[1].mutable_grad()[2] = std::numeric_limits<float>::quiet_NaN();
}

torch::Tensor found_inf(bool skip) { return torch::full({1}, skip ? 1.0f : 0.0f); }

// Every tensor of the optimizer's state and each parameter's step count, as saved by
// torch::save: what the user's code and a checkpoint see.
std::string saved(torch::optim::Optimizer& optimizer) {
  std::ostringstream out;
  torch::save(optimizer, out);
  return out.str();
}

void expect_close(const std::vector<torch::Tensor>& ours, const std::vector<torch::Tensor>& theirs) {
  ASSERT_EQ(ours.size(), theirs.size());
  for (size_t i = 0; i < ours.size(); ++i) {
    EXPECT_TRUE(torch::allclose(ours[i], theirs[i], 1e-5, 1e-6)) << "parameter " << i << "\n" << ours[i] - theirs[i];
  }
}

std::vector<torch::Tensor> copies(const std::vector<torch::Tensor>& tensors) {
  std::vector<torch::Tensor> out;
  for (const auto& t : tensors) out.push_back(t.detach().clone());
  return out;
}

// The state tensors libtorch keeps for `p` (moments or momentum buffer), empty without state.
std::vector<torch::Tensor> state_tensors(torch::optim::Optimizer& optimizer, const torch::Tensor& p, int64_t* step_count) {
  const auto found = optimizer.state().find(keel::probe::compat::optimizer_state_key(p));
  if (found == optimizer.state().end()) return {};
  if (auto* s = dynamic_cast<torch::optim::AdamWParamState*>(found->second.get())) {
    *step_count = s->step();
    return {s->exp_avg(), s->exp_avg_sq(), s->max_exp_avg_sq()};
  }
  if (auto* s = dynamic_cast<torch::optim::AdamParamState*>(found->second.get())) {
    *step_count = s->step();
    return {s->exp_avg(), s->exp_avg_sq(), s->max_exp_avg_sq()};
  }
  return {static_cast<torch::optim::SGDParamState&>(*found->second).momentum_buffer()};
}

void expect_same_state(torch::optim::Optimizer& ours, torch::optim::Optimizer& theirs,
                       const std::vector<torch::Tensor>& our_params, const std::vector<torch::Tensor>& their_params) {
  ASSERT_EQ(ours.state().size(), theirs.state().size());
  for (size_t i = 0; i < our_params.size(); ++i) {
    SCOPED_TRACE("parameter " + std::to_string(i));
    int64_t our_count = -1, their_count = -1;
    const auto a = state_tensors(ours, our_params[i], &our_count);
    const auto b = state_tensors(theirs, their_params[i], &their_count);
    EXPECT_EQ(our_count, their_count);
    ASSERT_EQ(a.size(), b.size());
    for (size_t k = 0; k < a.size(); ++k) {
      ASSERT_EQ(a[k].defined(), b[k].defined()) << "state tensor " << k;
      if (a[k].defined()) {
        EXPECT_TRUE(torch::allclose(a[k], b[k], 1e-5, 1e-6)) << "state tensor " << k;
      }
    }
  }
}

// The same parameters twice: ours stepped by FusedOptimizerStep, theirs by libtorch's own step.
struct Twins {
  explicit Twins(const MakeOptimizer& make)
      : ours(parameters()), theirs(parameters()), our_optimizer(make(ours)), their_optimizer(make(theirs)) {}
  // Step `step`'s gradients, applied by both; `sit_out` (a layer unused so far) has none.
  void step_both(int64_t step, int sit_out = -1) {
    set_gradients(ours, step);
    set_gradients(theirs, step);
    if (sit_out >= 0) {
      ours[sit_out].mutable_grad() = torch::Tensor();
      theirs[sit_out].mutable_grad() = torch::Tensor();
    }
    fused.step(*our_optimizer, found_inf(false));
    fused.settle(true);
    their_optimizer->step();
  }
  // A poisoned step of ours alone, skipped by its verdict.
  void skip_ours(int64_t step) {
    set_gradients(ours, step, /*poison=*/true);
    fused.step(*our_optimizer, found_inf(true));
    fused.settle(false);
  }
  void expect_alike() {
    expect_close(ours, theirs);
    expect_same_state(*our_optimizer, *their_optimizer, ours, theirs);
  }
  void expect_ours_bit_for_bit(const std::vector<torch::Tensor>& weights) {
    for (size_t i = 0; i < ours.size(); ++i) EXPECT_TRUE(torch::equal(ours[i], weights[i])) << "parameter " << i;
  }
  std::vector<torch::Tensor> ours, theirs;
  std::unique_ptr<torch::optim::Optimizer> our_optimizer, their_optimizer;
  FusedOptimizerStep fused;
};

TEST(FusedStep, MatchesLibtorchsOwnStepAndKeepsItsState) {
  SKIP_WITHOUT_CPU_FUSED_KERNELS();
  for (const auto& c : optimizer_cases()) {
    SCOPED_TRACE(c.name);
    Twins twins(c.make);
    for (int64_t step = 0; step < 5; ++step) twins.step_both(step);
    twins.expect_alike();

    // The state loads into a libtorch optimizer, whose own steps then go on as the twin's.
    auto reloaded = copies(twins.ours);
    for (auto& p : reloaded) p.requires_grad_();
    auto reloaded_optimizer = c.make(reloaded);
    std::istringstream in(saved(*twins.our_optimizer));
    torch::load(*reloaded_optimizer, in);
    for (int64_t step = 5; step < 7; ++step) {
      set_gradients(reloaded, step);
      set_gradients(twins.theirs, step);
      reloaded_optimizer->step();
      twins.their_optimizer->step();
    }
    expect_close(reloaded, twins.theirs);
  }
}

TEST(FusedStep, ASkippedStepLeavesWeightsAndStateBitForBit) {
  SKIP_WITHOUT_CPU_FUSED_KERNELS();
  for (const auto& c : optimizer_cases()) {
    SCOPED_TRACE(c.name);
    Twins twins(c.make);
    for (int64_t step = 0; step < 2; ++step) twins.step_both(step);
    const auto weights = copies(twins.ours);
    const std::string state = saved(*twins.our_optimizer);
    twins.skip_ours(2);
    twins.expect_ours_bit_for_bit(weights);
    EXPECT_EQ(saved(*twins.our_optimizer), state) << "the skipped step changed the optimizer's state";
    // The next step goes on as if the skipped one had never been taken.
    twins.step_both(3);
    twins.expect_alike();
  }
}

// A first step skipped creates no state: Adam's moments and counts and SGD's momentum buffers
// are made again by the next step, as libtorch's first step makes them.
TEST(FusedStep, ASkippedFirstStepLeavesNoState) {
  SKIP_WITHOUT_CPU_FUSED_KERNELS();
  for (const auto& c : optimizer_cases()) {
    SCOPED_TRACE(c.name);
    Twins twins(c.make);
    const auto weights = copies(twins.ours);
    twins.skip_ours(0);
    EXPECT_TRUE(twins.our_optimizer->state().empty());
    twins.expect_ours_bit_for_bit(weights);
    for (int64_t step = 1; step < 4; ++step) twins.step_both(step);
    twins.expect_alike();
  }
}

// A parameter given its first gradient late (a layer unused until then) joins an SGD whose
// other buffers exist: its buffer is made as libtorch makes it, the others go on.
TEST(FusedStep, AParameterWithoutABufferYetJoinsAnSgdWithMomentum) {
  SKIP_WITHOUT_CPU_FUSED_KERNELS();
  const auto sgd_momentum = optimizer_cases()[4];
  ASSERT_EQ(sgd_momentum.name, "SGD momentum");
  Twins twins(sgd_momentum.make);
  for (int64_t step = 0; step < 4; ++step) twins.step_both(step, /*sit_out=*/step < 2 ? 0 : -1);
  twins.expect_alike();
}

TEST(FusedStep, SaysWhatItCannotStep) {
  SKIP_WITHOUT_CPU_FUSED_KERNELS();
  std::string why;
  auto params = parameters();
  set_gradients(params, 0);
  torch::optim::RMSprop rmsprop(params, torch::optim::RMSpropOptions(1e-3));
  EXPECT_FALSE(FusedOptimizerStep::supports(rmsprop, torch::kCPU, why));
  EXPECT_EQ(why, "the optimizer is not AdamW, Adam or SGD");

  torch::optim::AdamW twice({params[0], params[1], params[0]}, torch::optim::AdamWOptions(1e-3));
  EXPECT_FALSE(FusedOptimizerStep::supports(twice, torch::kCPU, why));
  EXPECT_EQ(why, "a parameter is in the optimizer twice");
  FusedOptimizerStep fused;
  EXPECT_THROW(fused.step(twice, found_inf(false)), std::runtime_error);

  torch::optim::AdamW adamw(params, torch::optim::AdamWOptions(1e-3));
  EXPECT_TRUE(FusedOptimizerStep::supports(adamw, torch::kCPU, why)) << why;
  auto integer = torch::zeros({3}, torch::kInt);
  integer.mutable_grad() = torch::zeros({3}, torch::kInt);
  torch::optim::AdamW integers({integer}, torch::optim::AdamWOptions(1e-3));
  EXPECT_FALSE(FusedOptimizerStep::supports(integers, torch::kCPU, why));
  EXPECT_EQ(why, "a parameter is not fp32, fp64, bf16 or fp16 with a gradient of its type");

  auto transposed = torch::randn({4, 3}, torch::requires_grad());
  transposed.mutable_grad() = torch::randn({3, 4}).t();
  torch::optim::SGD strided({transposed}, torch::optim::SGDOptions(0.1));
  EXPECT_FALSE(FusedOptimizerStep::supports(strided, torch::kCPU, why));
  EXPECT_EQ(why, "a parameter is not dense (non-overlapping) or its gradient is laid out differently");
}

// State the kernels would refuse (here a moment loaded as fp64 for an fp32 parameter) is
// refused before the step counts anything, so libtorch's own step can be taken instead.
TEST(FusedStep, StateTheKernelsWouldRefuseIsRefusedBeforeAnythingIsCounted) {
  SKIP_WITHOUT_CPU_FUSED_KERNELS();
  auto params = parameters();
  torch::optim::AdamW adamw(params, torch::optim::AdamWOptions(1e-3));
  FusedOptimizerStep fused;
  set_gradients(params, 0);
  fused.step(adamw, found_inf(false));
  fused.settle(true);
  auto& state = static_cast<torch::optim::AdamWParamState&>(*adamw.state().at(keel::probe::compat::optimizer_state_key(params[0])));
  state.exp_avg(state.exp_avg().to(torch::kDouble));
  const auto weights = copies(params);
  std::string why;
  EXPECT_FALSE(FusedOptimizerStep::supports(adamw, torch::kCPU, why));
  EXPECT_EQ(why, "a parameter's optimizer state is not laid out as the parameter (element type, device, sizes, strides)");
  set_gradients(params, 1);
  EXPECT_THROW(fused.step(adamw, found_inf(false)), std::runtime_error);
  for (const auto& p : params) {
    int64_t count = -1;
    state_tensors(adamw, p, &count);
    EXPECT_EQ(count, 1) << "no step counted";
  }
  for (size_t i = 0; i < params.size(); ++i) EXPECT_TRUE(torch::equal(params[i], weights[i])) << "parameter " << i;
}

}  // namespace
