// Where the NaN was born, and why (issue 28, DESIGN §2.1). The trainer of the issue: four
// residual blocks, block 2 adding the entropy of its routing softmax to the loss. One outlier
// sample makes a routing probability underflow to exactly 0, and 0 * log(0) is NaN in block
// 2's forward pass. Before, keel named head.bias (the layer nearest the loss). Now the plain
// probe.step(loss) says the NaN came from the forward pass and names no layer, and the closure
// form names aten::log in blocks.2.route with its evidence. The other causes a re-run can tell
// apart (the batch, the weights, the backward pass, a fault that does not repeat) are checked
// one by one, and a re-run is shown to leave the run as it was.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "keel/probe/probe.hpp"
#include "quiet_options.hpp"
#include "two_layer_net.hpp"

namespace {

constexpr int64_t kDim = 8;
constexpr int64_t kBadStep = 3;

struct BlockImpl : torch::nn::Module {
  explicit BlockImpl(bool routed) {
    fc = register_module("fc", torch::nn::Linear(kDim, kDim));
    if (routed) route = register_module("route", torch::nn::Linear(kDim, 4));
  }
  // The block's output; a routed block adds its routing entropy term to `aux`.
  torch::Tensor forward(const torch::Tensor& x, torch::Tensor& aux) {
    auto h = x + torch::tanh(fc->forward(x));
    if (route) {
      const auto p = torch::softmax(route->forward(h), -1);
      aux = aux + (p * torch::log(p)).sum(-1).mean();
    }
    return h;
  }
  torch::nn::Linear fc{nullptr}, route{nullptr};
};
TORCH_MODULE(Block);

struct RoutedNetImpl : torch::nn::Module {
  RoutedNetImpl() {
    blocks = register_module("blocks", torch::nn::ModuleList());
    for (int i = 0; i < 4; ++i) blocks->push_back(Block(i == 2));
    head = register_module("head", torch::nn::Linear(kDim, 1));
  }
  torch::Tensor loss(const torch::Tensor& x, const torch::Tensor& y) {
    auto aux = torch::zeros({});
    auto h = x;
    for (const auto& block : *blocks) h = block->as<Block>()->forward(h, aux);
    return torch::mse_loss(head->forward(h), y) - 0.01 * aux;
  }
  torch::nn::ModuleList blocks{nullptr};
  torch::nn::Linear head{nullptr};
};
TORCH_MODULE(RoutedNet);

// Step `step`'s batch; at kBadStep, with `outlier`, one sample is 1e4 times too large.
std::pair<torch::Tensor, torch::Tensor> batch(int64_t step, bool outlier) {
  torch::manual_seed(100 + step);
  auto x = torch::randn({16, kDim});
  if (outlier && step == kBadStep) x[5] = x[5] * 1e4;
  return {x, torch::randn({16, 1})};
}

const keel::wire::Event* first_nonfinite(const std::vector<keel::wire::Event>& events) {
  for (const auto& e : events) {
    if (e.kind == "first_nonfinite") return &e;
  }
  return nullptr;
}

struct RoutedRun {
  RoutedNet net;
  torch::optim::SGD opt{net->parameters(), torch::optim::SGDOptions(0.01)};
  keel::probe::Probe probe{*net, opt, keel::test::quiet()};
  RoutedRun() { torch::manual_seed(0); }
  // One step in the closure form on the batch (x, y).
  keel::probe::StepOutcome step(const torch::Tensor& x, const torch::Tensor& y) {
    return probe.step([&] {
      opt.zero_grad();
      auto loss = net->loss(x, y);
      loss.backward();
      return loss;
    });
  }
};

TEST(ForwardOrigin, ThePlainStepSaysTheForwardPassAndNamesNoLayerNearTheLoss) {
  torch::manual_seed(0);
  RoutedRun run;
  for (int64_t step = 0; step <= kBadStep; ++step) {
    const auto [x, y] = batch(step, true);
    run.opt.zero_grad();
    auto loss = run.net->loss(x, y);
    loss.backward();
    run.probe.step(loss);
  }
  const keel::wire::Event* event = first_nonfinite(run.probe.last_events());
  ASSERT_NE(event, nullptr) << "the outlier makes step " << kBadStep << " non-finite";
  ASSERT_TRUE(event->cause);
  EXPECT_EQ(event->cause->kind, "forward");
  EXPECT_EQ(event->cause->op, "") << "the plain step traces no op";
  EXPECT_EQ(event->layer, "") << "not head.bias, the layer nearest the loss";
  EXPECT_EQ(event->detail.find("head."), std::string::npos) << event->detail;
  EXPECT_NE(event->cause->sentence.find("forward pass"), std::string::npos) << event->cause->sentence;
  EXPECT_NE(event->cause->sentence.find("probe.step(closure)"), std::string::npos) << event->cause->sentence;
  EXPECT_EQ(run.probe.last_record().cause, "forward");
}

TEST(ForwardOrigin, TheClosureNamesTheOpTheModuleAndTheEvidence) {
  torch::manual_seed(0);
  RoutedRun run;
  int calls = 0;
  for (int64_t step = 0; step <= kBadStep; ++step) {
    const auto [x, y] = batch(step, true);
    run.probe.step([&, x = x, y = y] {
      ++calls;
      run.opt.zero_grad();
      auto loss = run.net->loss(x, y);
      loss.backward();
      return loss;
    });
  }
  EXPECT_EQ(calls, kBadStep + 2) << "one call per step, and one re-run of the unsafe step";
  const keel::wire::Event* event = first_nonfinite(run.probe.last_events());
  ASSERT_NE(event, nullptr);
  ASSERT_TRUE(event->cause);
  EXPECT_EQ(event->cause->kind, "forward") << event->cause->sentence;
  EXPECT_EQ(event->cause->op, "aten::log") << event->cause->sentence;
  EXPECT_EQ(event->cause->module, "blocks.2.route") << event->cause->sentence;
  EXPECT_NE(event->cause->evidence.find("underflowed to 0"), std::string::npos) << event->cause->evidence;
  EXPECT_EQ(event->layer, "blocks.2.route.weight");
  EXPECT_NE(event->cause->sentence.find("aten::log in blocks.2.route at step 3"), std::string::npos)
      << event->cause->sentence;
  EXPECT_TRUE(run.probe.last_record().skipped);
}

TEST(ForwardOrigin, ANaNInTheBatchIsTheInput) {
  torch::manual_seed(0);
  RoutedRun run;
  auto [x, y] = batch(0, false);
  x[2][3] = std::numeric_limits<float>::quiet_NaN();
  run.step(x, y);
  const keel::wire::Event* event = first_nonfinite(run.probe.last_events());
  ASSERT_NE(event, nullptr);
  ASSERT_TRUE(event->cause);
  EXPECT_EQ(event->cause->kind, "input") << event->cause->sentence;
  EXPECT_EQ(event->cause->module, "blocks.0.fc") << event->cause->sentence;
  EXPECT_NE(event->cause->evidence.find("1 of 128 values NaN"), std::string::npos) << event->cause->evidence;
}

TEST(ForwardOrigin, AWeightAlreadyNonFiniteIsTheWeights) {
  torch::manual_seed(0);
  RoutedRun run;
  {
    torch::NoGradGuard no_grad;
    run.net->blocks[1]->as<Block>()->fc->weight[0][0] = std::numeric_limits<float>::infinity();
  }
  const auto [x, y] = batch(0, false);
  run.step(x, y);
  const keel::wire::Event* event = first_nonfinite(run.probe.last_events());
  ASSERT_NE(event, nullptr);
  ASSERT_TRUE(event->cause);
  EXPECT_EQ(event->cause->kind, "weights") << event->cause->sentence;
  EXPECT_EQ(event->cause->module, "blocks.1.fc.weight");
  EXPECT_EQ(event->layer, "blocks.1.fc.weight");
}

// Attention with a causal mask of -inf, as a registered buffer and as a constant built in the
// forward pass: infinities the code means, which must not be taken for the origin.
struct MaskedNetImpl : torch::nn::Module {
  explicit MaskedNetImpl(int64_t n) {
    fc = register_module("fc", torch::nn::Linear(kDim, kDim));
    route = register_module("route", torch::nn::Linear(kDim, 4));
    head = register_module("head", torch::nn::Linear(kDim, 1));
    mask = register_buffer("mask", torch::full({n, n}, -std::numeric_limits<float>::infinity()).triu(1));
  }
  torch::Tensor loss(const torch::Tensor& x, const torch::Tensor& y) {
    const int64_t n = x.size(0);
    const auto q = fc->forward(x);
    const auto also_causal = torch::full({n, n}, -std::numeric_limits<float>::infinity()).triu(1);
    const auto scores = torch::matmul(q, q.t()) / std::sqrt(static_cast<double>(kDim)) + mask + also_causal;
    const auto h = torch::matmul(torch::softmax(scores, -1), q);
    const auto p = torch::softmax(route->forward(h), -1);
    return torch::mse_loss(head->forward(h), y) - 0.01 * (p * torch::log(p)).sum(-1).mean();
  }
  torch::nn::Linear fc{nullptr}, route{nullptr}, head{nullptr};
  torch::Tensor mask;
};
TORCH_MODULE(MaskedNet);

TEST(ForwardOrigin, AMasksMinusInfinityIsNotTheOrigin) {
  torch::manual_seed(0);
  MaskedNet net(16);
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.01));
  keel::probe::Probe probe(*net, opt, keel::test::quiet());
  auto [x, y] = batch(kBadStep, true);
  probe.step([&] {
    opt.zero_grad();
    auto loss = net->loss(x, y);
    loss.backward();
    return loss;
  });
  const keel::wire::Event* event = first_nonfinite(probe.last_events());
  ASSERT_NE(event, nullptr);
  ASSERT_TRUE(event->cause);
  EXPECT_EQ(event->cause->kind, "forward") << event->cause->sentence;
  EXPECT_EQ(event->cause->op, "aten::log") << event->cause->sentence;
  EXPECT_EQ(event->cause->module, "route") << event->cause->sentence;
}

// sqrt(sum z^2) over a row of zeros is 0 going forward, and its gradient divides by it.
struct RowNormNetImpl : torch::nn::Module {
  RowNormNetImpl() {
    enc = register_module("enc", torch::nn::Linear(kDim, kDim));
    head = register_module("head", torch::nn::Linear(kDim, 1));
  }
  torch::Tensor loss(const torch::Tensor& x, const torch::Tensor& mask, const torch::Tensor& y) {
    const auto z = enc->forward(x) * mask;
    const auto magnitude = torch::sqrt(z.pow(2).sum(-1, /*keepdim=*/true));
    return torch::mse_loss(head->forward(z) + magnitude, y);
  }
  torch::nn::Linear enc{nullptr}, head{nullptr};
};
TORCH_MODULE(RowNormNet);

TEST(ForwardOrigin, ANaNBornInTheBackwardPassNamesAutogradsNodeAndTheForwardModule) {
  torch::manual_seed(0);
  RowNormNet net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.01));
  keel::probe::Probe probe(*net, opt, keel::test::quiet());
  const auto x = torch::randn({4, kDim});
  auto mask = torch::ones({4, 1});
  mask[1] = 0;   // sample 1's row of z is all zeros
  const auto y = torch::randn({4, 1});
  probe.step([&] {
    opt.zero_grad();
    auto loss = net->loss(x, mask, y);
    loss.backward();
    return loss;
  });
  const keel::wire::Event* event = first_nonfinite(probe.last_events());
  ASSERT_NE(event, nullptr);
  ASSERT_TRUE(event->cause);
  EXPECT_EQ(event->cause->kind, "backward") << event->cause->sentence;
  EXPECT_EQ(event->cause->op, "SqrtBackward0") << event->cause->sentence;
  EXPECT_EQ(event->cause->module, "enc") << event->cause->sentence;
  EXPECT_NE(event->cause->evidence.find("division by 0"), std::string::npos) << event->cause->evidence;
  EXPECT_TRUE(std::isfinite(probe.last_record().loss));
}

// A fault of the first run alone (a bit flip, a race): the re-run is finite. The run of the
// closure form then goes on exactly as a plain run does: same weights, buffers, random state.
struct NoisyNetImpl : torch::nn::Module {
  NoisyNetImpl() {
    fc = register_module("fc", torch::nn::Linear(kDim, kDim));
    norm = register_module("norm", torch::nn::BatchNorm1d(kDim));
    drop = register_module("drop", torch::nn::Dropout(0.3));
    head = register_module("head", torch::nn::Linear(kDim, 1));
  }
  torch::Tensor loss(const torch::Tensor& x, const torch::Tensor& y) {
    return torch::mse_loss(head->forward(drop->forward(norm->forward(fc->forward(x)))), y);
  }
  torch::nn::Linear fc{nullptr}, head{nullptr};
  torch::nn::BatchNorm1d norm{nullptr};
  torch::nn::Dropout drop{nullptr};
};
TORCH_MODULE(NoisyNet);

std::vector<torch::Tensor> state_of(torch::nn::Module& net) {
  std::vector<torch::Tensor> out;
  for (const auto& p : net.parameters()) out.push_back(p.detach().clone());
  for (const auto& b : net.buffers()) out.push_back(b.clone());
  out.push_back(torch::rand({4}));   // the random state, drawn
  return out;
}

std::vector<torch::Tensor> run_noisy(bool closure_form, std::string& cause) {
  torch::manual_seed(0);
  NoisyNet net;
  torch::optim::AdamW opt(net->parameters(), torch::optim::AdamWOptions(1e-2));
  keel::probe::Probe probe(*net, opt, keel::test::quiet());
  for (int64_t step = 0; step < 6; ++step) {
    torch::manual_seed(200 + step);
    const auto x = torch::randn({16, kDim});
    const auto y = torch::randn({16, 1});
    bool faulted = false;
    auto closure = [&] {
      opt.zero_grad();
      auto loss = net->loss(x, y);
      // The fault strikes the first run of step kBadStep only.
      if (step == kBadStep && !faulted) {
        faulted = true;
        loss = loss * std::numeric_limits<float>::quiet_NaN();
      }
      loss.backward();
      return loss;
    };
    if (closure_form) {
      probe.step(closure);
    } else {
      probe.step(closure());
    }
    if (step == kBadStep) {
      const keel::wire::Event* event = first_nonfinite(probe.last_events());
      cause = event && event->cause ? event->cause->kind : "";
    }
  }
  return state_of(*net);
}

TEST(ForwardOrigin, AFaultThatDoesNotComeBackIsTransientAndTheReRunLeavesTheRunAsItWas) {
  std::string traced, plain;
  const auto with_rerun = run_noisy(true, traced);
  const auto without = run_noisy(false, plain);
  EXPECT_EQ(traced, "transient");
  EXPECT_EQ(plain, "forward");
  ASSERT_EQ(with_rerun.size(), without.size());
  for (size_t i = 0; i < with_rerun.size(); ++i) {
    EXPECT_TRUE(keel::test::bit_identical(with_rerun[i], without[i]))
        << "the re-run changed tensor " << i << " of the weights, the buffers and a random draw";
  }
}

}  // namespace
