// The early warning's rules (forecast/forecaster.hpp) on made-up step records: each signal that
// grows (or drifts, or falls) as runs do before they diverge is warned, with its numbers and a
// lead; the same signals as healthy runs make them (noise, a warmup, a slow drift, a scaler's
// backoffs, single spikes) are not, and a warned signal stays quiet for quiet_steps.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "forecast/forecaster.hpp"

namespace {

using keel::probe::Forecast;
using keel::probe::Forecaster;
using keel::wire::LayerMetric;
namespace wire = keel::wire;

constexpr uint32_t kLayers = 4;

wire::RunDescription four_layers() {
  wire::RunDescription run;
  for (uint32_t i = 0; i < kLayers; ++i) run.layers.push_back(wire::LayerInfo{"blocks." + std::to_string(i) + ".weight"});
  return run;
}

// A step's record: its grad norm, learning rate, and each layer's update ratio (weights of norm 1).
wire::StepRecord record(int64_t step, double grad_norm, double lr, const std::vector<double>& ratios) {
  wire::StepRecord r;
  r.step = step;
  r.loss = 2.0;
  r.lr = lr;
  r.grad_norm = grad_norm;
  r.layer_count = kLayers;
  r.metric_mask = wire::bit_of(LayerMetric::kParamNorm) | wire::bit_of(LayerMetric::kUpdateRatio);
  // Metric-major, ascending metric order: param_norm comes before update_ratio.
  for (uint32_t i = 0; i < kLayers; ++i) r.layer_values.push_back(1.0f);
  for (const double v : ratios) r.layer_values.push_back(static_cast<float>(v));
  return r;
}

struct Healthy {
  std::mt19937 rng{7};
  std::lognormal_distribution<double> noise{0.0, 0.3};   // a minibatch's grad norm: +-30%
  // Step s of a healthy run: warmup to 3e-3 over 200 steps, the grad norm falling from 2 and then
  // drifting up 2x over 5,000 steps, update ratios lr times ~2 with noise, a spike now and then.
  wire::StepRecord at(int64_t s) {
    const double lr = 3e-3 * std::min(1.0, (s + 1) / 200.0);
    double gn = (0.5 + 1.5 * std::exp(-s / 100.0)) * std::exp2(s / 5000.0) * noise(rng);
    if (s % 397 == 0) gn *= 20;   // a bad batch
    std::vector<double> ratios;
    for (uint32_t i = 0; i < kLayers; ++i) ratios.push_back(lr * 2.0 * noise(rng));
    wire::StepRecord r = record(s, gn, lr, ratios);
    r.loss = (1.5 + 3.0 / std::sqrt(1.0 + s / 20.0)) * loss_noise(rng);   // falling, +-10% a batch
    return r;
  }
  std::lognormal_distribution<double> loss_noise{0.0, 0.1};
};

TEST(Forecaster, TenThousandHealthyStepsRaiseNoWarning) {
  Forecaster forecaster;
  const wire::RunDescription run = four_layers();
  Healthy healthy;
  std::vector<Forecast> out;
  int warnings = 0;
  for (int64_t s = 0; s < 10000; ++s) {
    forecaster.observe(healthy.at(s), run, out);
    for (const Forecast& f : out) ADD_FAILURE() << "step " << s << ": " << f.sentence;
    warnings += static_cast<int>(out.size());
  }
  EXPECT_EQ(warnings, 0);
}

// A forecaster warmed up on healthy steps [0, from), then fed steps [from, from + 200) as
// `change` makes them of the healthy ones (given the step's distance from `from`): the warnings
// of `signal` it raised, each with its step.
template <typename Change>
std::vector<std::pair<int64_t, Forecast>> warnings_of(const std::string& signal, int64_t from, Change change) {
  Forecaster forecaster;
  const wire::RunDescription run = four_layers();
  Healthy healthy;
  std::vector<Forecast> out;
  for (int64_t s = 0; s < from; ++s) forecaster.observe(healthy.at(s), run, out);
  std::vector<std::pair<int64_t, Forecast>> warnings;
  for (int64_t s = from; s < from + 200; ++s) {
    wire::StepRecord r = healthy.at(s);
    change(r, static_cast<double>(s - from));
    forecaster.observe(r, run, out);
    for (const Forecast& f : out) {
      if (f.warning.signal == signal) warnings.emplace_back(s, f);
    }
  }
  return warnings;
}

TEST(Forecaster, AGradNormGrowingThreePercentAStepIsWarnedWithItsNumbersAndALead) {
  const auto warnings = warnings_of("grad_norm", 1000, [](wire::StepRecord& r, double t) { r.grad_norm *= std::pow(1.03, t); });
  ASSERT_FALSE(warnings.empty()) << "never warned";
  const auto& [warned, first] = warnings.front();
  // Doubling takes 23 steps at 3% a step; the fast level trails by some steps.
  EXPECT_LT(warned, 1060);
  EXPECT_GT(first.warning.value, 1.5 * first.warning.baseline);
  EXPECT_GT(first.warning.per_step, 0.01);
  EXPECT_GT(first.warning.lead_steps, 0);
  EXPECT_NE(first.sentence.find("grad norm"), std::string::npos) << first.sentence;
  EXPECT_NE(first.warning.advice.find("learning rate"), std::string::npos);
}

TEST(Forecaster, AGrowthWarnedPastTheTroubleLevelSaysSoRatherThanALead) {
  // 40% a step: past 10x its baseline by the time the fast level has stood 2x above it for 8 steps.
  const auto warnings = warnings_of("grad_norm", 1000, [](wire::StepRecord& r, double t) { r.grad_norm *= std::pow(1.4, t); });
  ASSERT_FALSE(warnings.empty());
  const Forecast& first = warnings.front().second;
  EXPECT_GT(first.warning.value, 10 * first.warning.baseline);
  EXPECT_NE(first.sentence.find("past 10x already"), std::string::npos) << first.sentence;
  EXPECT_EQ(first.sentence.find("in about"), std::string::npos) << first.sentence;
}

TEST(Forecaster, UpdatesGrowingFasterThanTheLearningRateNameTheSteepestLayer) {
  // Layer 2's updates grow 6% a step, the others stay: the run's ratio grows with it.
  const auto warnings = warnings_of("update_ratio", 600, [](wire::StepRecord& r, double t) {
    r.layer_values[kLayers + 2] *= static_cast<float>(std::pow(1.06, t));
  });
  ASSERT_FALSE(warnings.empty());
  EXPECT_EQ(warnings[0].second.layer, "blocks.2.weight");
  EXPECT_NE(warnings[0].second.sentence.find("blocks.2.weight"), std::string::npos) << warnings[0].second.sentence;
}

TEST(Forecaster, ALossClimbingOutOfItsValleyIsWarned) {
  // 1% a step: twice the loss in 70 steps.
  const auto warnings = warnings_of("loss", 800, [](wire::StepRecord& r, double t) { r.loss *= std::pow(1.01, t); });
  ASSERT_FALSE(warnings.empty());
  EXPECT_LT(warnings[0].first, 870) << "before the loss doubled";
}

TEST(Forecaster, ALearningRateRisingWhileTheUpdatesPerUnitOfItFallIsAnOvershoot) {
  // The learning rate 2% up a step; the updates 2% down (Adam's directions cancelling).
  const auto warnings = warnings_of("update_ratio", 600, [](wire::StepRecord& r, double t) {
    const double up = std::pow(1.02, t);
    r.lr *= up;
    for (uint32_t i = 0; i < kLayers; ++i) r.layer_values[kLayers + i] /= static_cast<float>(up);
  });
  ASSERT_FALSE(warnings.empty());
  EXPECT_NE(warnings[0].second.sentence.find("overshoot"), std::string::npos) << warnings[0].second.sentence;
}

TEST(Forecaster, AWarnedSignalStaysQuietForQuietStepsThenWarnsAgain) {
  Forecaster forecaster;
  const wire::RunDescription run = four_layers();
  std::vector<Forecast> out;
  std::vector<int64_t> warned;
  for (int64_t s = 0; s < 2000; ++s) {
    // Flat, then growing 2% a step for ever from step 200.
    const double gn = s < 200 ? 1.0 : std::pow(1.02, double(s - 200));
    forecaster.observe(record(s, gn, 1e-3, {2e-3, 2e-3, 2e-3, 2e-3}), run, out);
    for (const Forecast& f : out) {
      if (f.warning.signal == "grad_norm") warned.push_back(s);
    }
  }
  ASSERT_GE(warned.size(), 2u);
  EXPECT_GE(warned[1] - warned[0], forecaster.rule().quiet_steps);
}

TEST(Forecaster, GrowingLogitsAndADriftingLogZOfAWatchedTensorAreWarned) {
  Forecaster forecaster;
  const wire::RunDescription run = four_layers();
  std::vector<Forecast> out;
  std::vector<Forecast> warnings;
  for (int64_t s = 0; s < 400; ++s) {
    wire::StepRecord r = record(s, 1.0, 1e-3, {2e-3, 2e-3, 2e-3, 2e-3});
    const double grow = s < 200 ? 1.0 : std::pow(1.04, double(s - 200));
    const double z = s < 200 ? 4.0 : 4.0 - 0.1 * double(s - 200);
    r.watches.push_back(wire::WatchStats{"logits", static_cast<float>(8.0 * grow), 1.0f, static_cast<float>(z), 0});
    forecaster.observe(r, run, out);
    for (const Forecast& f : out) warnings.push_back(f);
  }
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_EQ(warnings[0].warning.signal, "logit_max");
  EXPECT_EQ(warnings[0].layer, "logits");
  EXPECT_EQ(warnings[1].warning.signal, "log_z");
  EXPECT_LT(warnings[1].warning.value, warnings[1].warning.baseline - 2.0);
  EXPECT_NE(warnings[1].warning.advice.find("z-loss"), std::string::npos);
}

// The warnings a fresh forecaster raises on `steps` flat steps whose watched tensor "scores"
// has the largest magnitude absmax(step).
template <typename Absmax>
std::vector<std::pair<int64_t, Forecast>> watch_warnings(int64_t steps, Absmax absmax) {
  Forecaster forecaster;
  const wire::RunDescription run = four_layers();
  std::vector<Forecast> out;
  std::vector<std::pair<int64_t, Forecast>> warnings;
  for (int64_t s = 0; s < steps; ++s) {
    wire::StepRecord r = record(s, 1.0, 1e-3, {2e-3, 2e-3, 2e-3, 2e-3});
    r.watches.push_back(wire::WatchStats{"scores", static_cast<float>(absmax(s)), 1.0f, 4.0f, 0});
    forecaster.observe(r, run, out);
    for (const Forecast& f : out) warnings.emplace_back(s, f);
  }
  return warnings;
}

TEST(Forecaster, AttentionLogitsRunningAwayFromTheStartAreWarnedWithinTheWarmUp) {
  // 8% a step from 5 (a learning rate too high from step 0): 30 by step 23, 1e4 by step 100.
  const auto warnings = watch_warnings(200, [](int64_t s) { return 5.0 * std::pow(1.08, double(s)); });
  ASSERT_FALSE(warnings.empty());
  const auto& [warned, first] = warnings.front();
  EXPECT_LT(warned, 60) << first.sentence;
  EXPECT_EQ(first.warning.signal, "logit_max");
  EXPECT_EQ(first.layer, "scores");
  EXPECT_GT(first.warning.value, 30.0);
  EXPECT_NE(first.sentence.find("one-hot"), std::string::npos) << first.sentence;
}

TEST(Forecaster, LogitsGrowingAsAModelLearnsAreNotWarnedBelowTheFloor) {
  // A model's attention logits as it starts to learn: 0.1 to 10 in 70 steps (7% a step), then
  // doubling again slowly to 20 after the warm-up: healthy, however fast, below the floor.
  const auto warnings = watch_warnings(1000, [](int64_t s) {
    if (s < 70) return 0.1 * std::pow(1.068, double(s));
    return s < 300 ? 10.0 : 10.0 * std::min(2.0, 1.0 + double(s - 300) / 100.0);
  });
  for (const auto& [step, f] : warnings) ADD_FAILURE() << "step " << step << ": " << f.sentence;
}

TEST(Forecaster, ABadBatchsAftermathIsNotATrendButATrendThatOutlastsItIs) {
  const auto spike_then_loss = [](double lasting) {
    return [lasting](wire::StepRecord& r, double t) {
      if (t == 0) r.grad_norm *= 100;                   // one bad batch
      if (t < lasting) r.loss *= 1.5 - 0.5 * t / 200;   // the loss it knocked up, healing slowly
    };
  };
  const auto aftermath = warnings_of("loss", 1000, spike_then_loss(25));
  for (const auto& [step, f] : aftermath) ADD_FAILURE() << "step " << step << ": " << f.sentence;
  const auto lasting = warnings_of("loss", 1000, spike_then_loss(200));
  ASSERT_FALSE(lasting.empty()) << "the loss stayed up after the aftermath and was not warned";
  EXPECT_GE(lasting.front().first, 1000 + Forecaster().rule().aftermath_steps);
}

TEST(Forecaster, ALossRisingWithItsGradNormIsWarnedSoonerThanALossRisingAlone) {
  // The loss up 0.5% a step from step 1000 (a run of batches that grow more harmful), alone or
  // with the grad norm up 1% a step: together they are a climb well before the loss alone is.
  const auto loss_up = [](wire::StepRecord& r, double t) { r.loss *= std::pow(1.005, t); };
  const auto alone = warnings_of("loss", 1000, loss_up);
  const auto together = warnings_of("loss", 1000, [&](wire::StepRecord& r, double t) {
    loss_up(r, t);
    r.grad_norm *= std::pow(1.01, t);
  });
  ASSERT_FALSE(alone.empty());
  ASSERT_FALSE(together.empty());
  EXPECT_LE(together.front().first + 10, alone.front().first);
  EXPECT_NE(together.front().second.sentence.find("grad norm"), std::string::npos) << together.front().second.sentence;
  EXPECT_EQ(alone.front().second.sentence.find("grad norm"), std::string::npos) << alone.front().second.sentence;
}

TEST(Forecaster, ALossScaleFallingTowardUnderflowIsWarnedAndAScalersBackoffsAreNot) {
  Forecaster forecaster;
  const wire::RunDescription run = four_layers();
  std::vector<Forecast> out;
  std::vector<Forecast> warnings;
  double scale = 65536;
  for (int64_t s = 0; s < 2800; ++s) {
    if (s < 2000) {
      // A healthy scaler: backs off at its first steps, then now and then, and grows back.
      if (s < 5 || s % 300 == 0) scale /= 2;
      if (s % 100 == 50 && scale < 65536) scale *= 2;
    } else if (s % 10 == 0) {
      scale /= 2;   // overflowing every tenth step
    }
    wire::StepRecord r = record(s, 1.0, 1e-3, {2e-3, 2e-3, 2e-3, 2e-3});
    r.scaler = wire::ScalerState{scale, 0, false, 0};
    forecaster.observe(r, run, out);
    for (const Forecast& f : out) {
      EXPECT_GE(s, 2000) << f.sentence;
      warnings.push_back(f);
    }
  }
  // Once it falls, and again after quiet_steps while it still falls; never before.
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_EQ(warnings[0].warning.signal, "loss_scale");
  EXPECT_LT(warnings[0].warning.value, warnings[0].warning.baseline / 60);
  EXPECT_GT(warnings[0].warning.lead_steps, 0);
}

}  // namespace
