// The early warning end to end with the real keel-demo (docs/warnings.md): a learning rate that
// keeps rising after its warmup (--drift lr, a schedule gone wrong) is warned at least 20 steps
// before the run diverges, and with --warning-lr-factor the warning halves the learning rate,
// which keel-demo's schedule keeps from then on (Trainer::keep_lr_cut); with its attention
// logits watched (--watch-attention), a learning rate too high from the start is warned within
// the warm-up, and a healthy run is not.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <regex>
#include <string>
#include <vector>

namespace {

struct DemoRun {
  std::string out;
  std::map<long, std::pair<double, double>> logged;   // step -> (loss, lr)
  std::vector<long> warned;                            // the steps of its warnings
};

// keel-demo's model made small (seconds on a CPU), every step logged.
DemoRun run_demo(const std::string& flags, int steps = 700) {
  const std::string command = KEEL_DEMO_PATH " --steps " + std::to_string(steps) +
      " --seed 6 --width 48 --layers 2 --context 32 --threads 1 --log-every 1 --endpoint '' "
      "--record-dir '' --no-dump-nonfinite " +
      flags + " 2>&1";
  DemoRun run;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return run;
  char buffer[4096];
  while (fgets(buffer, sizeof buffer, pipe)) run.out += buffer;
  EXPECT_EQ(pclose(pipe), 0) << run.out;
  const std::regex progress(R"(^step +(\d+)  loss (\S+)  lr (\S+) )");
  const std::regex warning(R"(^keel-demo: step (\d+) event warning )");
  size_t start = 0;
  while (start < run.out.size()) {
    const size_t end = std::min(run.out.find('\n', start), run.out.size());
    const std::string line = run.out.substr(start, end - start);
    std::smatch m;
    if (std::regex_search(line, m, progress)) {
      run.logged[std::stol(m[1])] = {std::atof(m[2].str().c_str()), std::atof(m[3].str().c_str())};
    } else if (std::regex_search(line, m, warning)) {
      run.warned.push_back(std::stol(m[1]));
    }
    start = end + 1;
  }
  return run;
}

// The divergence's first step by the rewind policy's rule (docs/rewind.md): the loss above 2x
// the median of the 64 steps before it, for 10 steps in a row; -1: none.
long diverged_at(const std::map<long, std::pair<double, double>>& logged) {
  std::vector<double> losses;
  for (const auto& [step, values] : logged) losses.push_back(values.first);
  for (size_t i = 64; i + 10 <= losses.size(); ++i) {
    std::vector<double> window(losses.begin() + static_cast<long>(i) - 64, losses.begin() + static_cast<long>(i));
    std::nth_element(window.begin(), window.begin() + 32, window.end());
    const double bound = 2 * window[32];
    if (std::all_of(losses.begin() + static_cast<long>(i), losses.begin() + static_cast<long>(i) + 10,
                    [&](double l) { return l > bound; })) {
      return std::next(logged.begin(), static_cast<long>(i))->first;
    }
  }
  return -1;
}

TEST(WarningE2e, ALearningRateThatKeepsRisingIsWarnedAheadAndTheWarningCanHalveIt) {
  const DemoRun plain = run_demo("--drift lr:300");
  const long diverged = diverged_at(plain.logged);
  ASSERT_GT(diverged, 300) << plain.out;
  ASSERT_FALSE(plain.warned.empty()) << plain.out;
  EXPECT_GT(plain.warned.front(), 300);
  EXPECT_LE(plain.warned.front(), diverged - 20) << "warned at " << plain.warned.front() << ", diverged at " << diverged;
  EXPECT_EQ(plain.out.find("warning_lr_factor"), std::string::npos);

  const DemoRun cut = run_demo("--drift lr:300 --warning-lr-factor 0.5");
  ASSERT_FALSE(cut.warned.empty()) << cut.out;
  const long first = cut.warned.front();
  EXPECT_EQ(first, plain.warned.front()) << "the same run up to its first warning";
  EXPECT_NE(cut.out.find("learning rate x0.5 (warning_lr_factor)"), std::string::npos) << cut.out;
  for (const long step : {first + 1, first + 50}) {
    ASSERT_TRUE(cut.logged.count(step) && plain.logged.count(step)) << step;
    EXPECT_NEAR(cut.logged.at(step).second, 0.5 * plain.logged.at(step).second, 0.01 * plain.logged.at(step).second)
        << "step " << step;
  }
}

}  // namespace

TEST(WarningE2e, AttentionLogitsRunningAwayAtALearningRateTooHighAreWarnedWithinTheWarmUp) {
  // Peak 0.5 after 200 steps of warmup: keel-bench-warning's hot_lr, which diverges at ~170.
  const DemoRun hot = run_demo("--lr 0.5 --warmup 200 --watch-attention", 100);
  ASSERT_FALSE(hot.warned.empty()) << hot.out;
  EXPECT_LT(hot.warned.front(), 80) << hot.out;
  EXPECT_NE(hot.out.find(".attn.scores: the largest |value|"), std::string::npos) << hot.out;

  const DemoRun healthy = run_demo("--watch-attention", 500);
  EXPECT_TRUE(healthy.warned.empty()) << healthy.out;
}
