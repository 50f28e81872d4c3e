// ProbeOptions::on_event and the forecaster inside the probe (docs/warnings.md): every event is
// told once, on the training thread, with its fields; a callback that throws is the probe's
// counted probe_error and training goes on; a grad norm growing step after step through the
// real model raises a warning event with its numbers, and forecast = false raises none.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "keel/probe/probe.hpp"
#include "keel/wire/vocabulary.hpp"
#include "command_rig.hpp"
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
  // The loss, scaled with the ramp, climbs with its grad norm: the first warning may be either's.
  EXPECT_GT(first->warning->value, 1.1 * first->warning->baseline);
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

// With snapshots, a warning keeps the newest one from before it: two slots taken every 50 steps
// hold 350 and 400 at step 420, and with the warning of the trend begun at 300, 300 and 400: a
// rewind to before the trend is still possible.
TEST(OnEvent, AWarningKeepsTheSnapshotFromBeforeItsTrendForARewind) {
  for (const bool forecast : {true, false}) {
    torch::manual_seed(0);
    torch::nn::Linear net(8, 1);
    torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(1e-3));
    keel::probe::ProbeOptions options = keel::test::listening();
    options.forecast = forecast;
    options.rewind_every = 50;
    options.rewind_keep = 2;
    std::string warned;
    options.on_event = [&](const wire::Event& e) {
      if (e.kind == wire::event_kind::kWarning && warned.empty()) warned = e.detail;
    };
    keel::probe::Probe probe(*net, opt, options);
    keel::test::Client client(probe.bound_command_endpoint());
    const torch::Tensor truth = torch::randn({8, 1});
    int s = 0;
    const auto step = [&] {
      const torch::Tensor x = torch::randn({64, 8});
      const torch::Tensor loss = ramp(std::min(s, 420)) * (net->forward(x) - x.matmul(truth)).pow(2).mean();
      opt.zero_grad();
      loss.backward();
      probe.step(loss);
      ++s;
    };
    while (s < 421) step();
    wire::Command rewind = keel::test::command(1, wire::command_kind::kRewind);
    rewind.to_step = 320;
    client.send(rewind);
    std::optional<wire::Ack> ack;
    for (int i = 0; i < 200 && !ack; ++i) {
      step();
      ack = client.receive(20);
    }
    ASSERT_TRUE(ack) << "no ack";
    if (!forecast) {
      EXPECT_TRUE(warned.empty()) << warned;
      EXPECT_FALSE(ack->ok);
      EXPECT_NE(ack->error.find("(kept: 350, 400)"), std::string::npos) << ack->error;
      continue;
    }
    EXPECT_NE(warned.find("the snapshot of step 300 is kept for a rewind"), std::string::npos) << warned;
    EXPECT_TRUE(ack->ok) << ack->error;
    EXPECT_EQ(ack->step, 300);
  }
}

// A rewind puts the forecaster back with the state: the abandoned span's values (here a loss
// told 1000x for the steps from 400 until the rewind) leave its baselines and its quiet time, so
// the run after the rewind is warned exactly as a run that never had that span: a loss (and
// grad norm) ramp from step 500 is warned at the same step, against the same baseline.
TEST(OnEvent, ARewindPutsTheForecasterBackWithTheState) {
  std::optional<wire::Event> first[2];
  for (const bool abandoned_span : {false, true}) {
    torch::manual_seed(0);
    torch::nn::Linear net(8, 1);
    torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(1e-3));
    keel::probe::ProbeOptions options = keel::test::listening();
    options.rewind_every = 50;
    options.rewind_keep = 2;
    bool rewound = false;
    std::optional<wire::Event>& warning = first[abandoned_span];
    options.on_event = [&](const wire::Event& e) {
      if (e.kind == wire::event_kind::kRewind) rewound = true;
      if (e.kind == wire::event_kind::kWarning && (rewound || !abandoned_span) && !warning) warning = e;
    };
    keel::probe::Probe probe(*net, opt, options);
    keel::test::Client client(probe.bound_command_endpoint());
    torch::manual_seed(1);
    const torch::Tensor truth = torch::randn({8, 1});
    bool asked = false;
    for (int s = 0; s < 700;) {
      // Each step's batch is its own: the steps after the rewind see what the other run saw.
      torch::manual_seed(1000 + s);
      const torch::Tensor x = torch::randn({64, 8});
      const double weight = s <= 500 ? 1.0 : std::pow(1.05, s - 500);
      const torch::Tensor loss = weight * (net->forward(x) - x.matmul(truth)).pow(2).mean();
      opt.zero_grad();
      loss.backward();
      const bool told_wrong = abandoned_span && !rewound && s >= 400;
      probe.step(told_wrong ? loss.detach() * 1000 : loss);
      ++s;
      if (told_wrong && s == 440 && !asked) {
        wire::Command rewind = keel::test::command(1, wire::command_kind::kRewind);
        rewind.to_step = 400;
        client.send(rewind);
        asked = true;
      }
      if (rewound && s > 400 && asked) {
        asked = false;
        s = 400;   // the step the run goes on from
      }
      if (abandoned_span && s > 600 && !rewound) FAIL() << "never rewound";
    }
    ASSERT_TRUE(warning) << "no warning " << (abandoned_span ? "after the rewind" : "");
  }
  EXPECT_EQ(first[1]->step, first[0]->step);
  EXPECT_EQ(first[1]->warning->signal, first[0]->warning->signal);
  EXPECT_NEAR(first[1]->warning->baseline, first[0]->warning->baseline, 1e-6 * std::abs(first[0]->warning->baseline));
  EXPECT_GT(first[0]->step, 500);
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
