// ProbeOptions::on_event and the forecaster inside the probe (docs/warnings.md): every event is
// told once, on the training thread, with its fields; a callback that throws is the probe's
// counted probe_error and training goes on; a grad norm growing step after step through the
// real model raises a warning event with its numbers, and forecast = false raises none.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "keel/probe/probe.hpp"
#include "keel/wire/vocabulary.hpp"
#include "quiet_options.hpp"

namespace {

namespace wire = keel::wire;
using keel::test::quiet;

// A regression a Linear layer learns, its loss weighted by `weight` at step s (1: none).
std::vector<wire::Event> train(keel::probe::ProbeOptions options, int steps, double (*weight)(int)) {
  torch::manual_seed(0);
  torch::nn::Linear net(8, 1);
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(1e-3));
  std::vector<wire::Event> events;
  options.on_event = [&](const wire::Event& e) { events.push_back(e); };
  keel::probe::Probe probe(*net, opt, options);
  const torch::Tensor truth = torch::randn({8, 1});
  for (int s = 0; s < steps; ++s) {
    const torch::Tensor x = torch::randn({64, 8});
    const torch::Tensor loss = weight(s) * (net->forward(x) - x.matmul(truth)).pow(2).mean();
    opt.zero_grad();
    loss.backward();
    probe.step(loss);
  }
  return events;
}

double flat(int) { return 1.0; }
// From step 300 on, 5% more each step: the gradients grow with it.
double ramp(int s) { return s <= 300 ? 1.0 : std::pow(1.05, s - 300); }

TEST(OnEvent, AGrowingGradNormIsAWarningToldWithItsNumbersAndAHealthyRunHasNone) {
  const std::vector<wire::Event> healthy = train(quiet(), 500, flat);
  for (const wire::Event& e : healthy) EXPECT_NE(e.kind, wire::event_kind::kWarning) << e.detail;

  const std::vector<wire::Event> events = train(quiet(), 400, ramp);
  const wire::Event* first = nullptr;
  for (const wire::Event& e : events) {
    if (e.kind == wire::event_kind::kWarning && first == nullptr) first = &e;
  }
  ASSERT_NE(first, nullptr) << "no warning";
  EXPECT_GT(first->step, 300);
  EXPECT_LT(first->step, 340);
  ASSERT_TRUE(first->warning);
  EXPECT_GT(first->warning->value, 1.5 * first->warning->baseline);
  EXPECT_GT(first->warning->lead_steps, 0);
  EXPECT_FALSE(first->warning->advice.empty());

  keel::probe::ProbeOptions off = quiet();
  off.forecast = false;
  for (const wire::Event& e : train(off, 400, ramp)) EXPECT_NE(e.kind, wire::event_kind::kWarning) << e.detail;
}

// warning_lr_factor: the warning cuts the learning rate, once, and says so.
TEST(OnEvent, AWarningWithWarningLrFactorCutsTheLearningRateOnceAndSaysSo) {
  torch::manual_seed(0);
  torch::nn::Linear net(8, 1);
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(1e-3));
  keel::probe::ProbeOptions options = quiet();
  options.warning_lr_factor = 0.5;
  std::vector<wire::Event> warnings;
  options.on_event = [&](const wire::Event& e) {
    if (e.kind == wire::event_kind::kWarning) warnings.push_back(e);
  };
  keel::probe::Probe probe(*net, opt, options);
  const torch::Tensor truth = torch::randn({8, 1});
  for (int s = 0; s < 400; ++s) {
    const torch::Tensor x = torch::randn({64, 8});
    const torch::Tensor loss = ramp(s) * (net->forward(x) - x.matmul(truth)).pow(2).mean();
    opt.zero_grad();
    loss.backward();
    probe.step(loss);
  }
  ASSERT_FALSE(warnings.empty());
  EXPECT_NE(warnings[0].detail.find("learning rate x0.5 (warning_lr_factor)"), std::string::npos) << warnings[0].detail;
  int cuts = 0;
  for (const wire::Event& e : warnings) cuts += e.detail.find("warning_lr_factor") != std::string::npos;
  EXPECT_EQ(cuts, 1) << "once in quiet_steps";
  EXPECT_DOUBLE_EQ(static_cast<torch::optim::SGDOptions&>(opt.param_groups()[0].options()).lr(), 5e-4);
}

TEST(OnEvent, EachEventIsToldOnceAndACallbackThatThrowsIsAProbeErrorAndTrainingGoesOn) {
  torch::manual_seed(0);
  torch::nn::Linear net(4, 1);
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1));
  std::vector<std::string> kinds;
  keel::probe::ProbeOptions options = quiet();
  options.on_event = [&](const wire::Event& e) {
    kinds.push_back(e.kind);
    if (e.kind == wire::event_kind::kFirstNonfinite) throw std::runtime_error("the pager is down");
  };
  keel::probe::Probe probe(*net, opt, options);
  for (int s = 0; s < 6; ++s) {
    torch::Tensor loss = net->forward(torch::randn({8, 4})).pow(2).mean();
    if (s == 2) loss = loss * std::nan("");
    opt.zero_grad();
    loss.backward();
    const keel::probe::StepOutcome outcome = probe.step(loss);
    EXPECT_EQ(outcome.applied, s != 2);
  }
  int nonfinite = 0, errors = 0;
  for (const std::string& k : kinds) {
    nonfinite += k == wire::event_kind::kFirstNonfinite;
    errors += k == wire::event_kind::kProbeError;
  }
  EXPECT_EQ(nonfinite, 1) << "told once";
  EXPECT_EQ(errors, 1) << "the callback's failure, told as an event";
  EXPECT_EQ(probe.last_record().probe_errors, 1u);
}

}  // namespace
