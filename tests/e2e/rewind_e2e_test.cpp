// The run that heals itself, end to end with the real keel-demo (docs/rewind.md): one step's
// learning rate x1000 at step 150 (every value finite, nothing to skip) ruins the run without
// the rewind policy, and with it the run is rewound to a snapshot from before the spike and
// finishes within 5% of the undisturbed run's loss. A learning rate that stays 1000x too high
// diverges after every rewind: the policy stops at rewind_max and says so, once; with
// rewind_lr_factor its repeated rewinds cut the learning rate and the run heals. (Where a run
// left diverged at a learning rate 1000x too high ends is chaos: one torch's threads ended one
// at a loss of 2.3. So the healed run is judged by its own numbers: it never diverges again and
// ends near the loss it had before the trouble.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

// keel-demo's output for `flags` (no telemetry, no recording; a rewind's dump in the test's
// temporary directory), and its exit status.
std::string run_demo(const std::string& flags, int& status) {
  const std::string command = KEEL_DEMO_PATH " --steps 400 --seed 6 --log-every 1000 --endpoint '' --record-dir '' " +
                              ("--dump-dir " + testing::TempDir() + "keel-rewind-e2e-dumps ") + flags + " 2>&1";
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    status = -1;
    return out;
  }
  char buffer[4096];
  while (fgets(buffer, sizeof buffer, pipe)) out += buffer;
  status = pclose(pipe);
  return out;
}

// The loss keel-demo printed for its last step (399), or NaN.
double final_loss(const std::string& out) {
  const size_t at = out.rfind("step    399  loss ");
  return at == std::string::npos ? std::nan("") : std::atof(out.c_str() + at + 18);
}

// The loss median the rewind policy judged its first divergence against, or NaN.
double median_before_divergence(const std::string& out) {
  const std::string said = "the loss above 2x its median ";
  const size_t at = out.find(said);
  return at == std::string::npos ? std::nan("") : std::atof(out.c_str() + at + said.size());
}

TEST(RewindE2e, ALearningRateSpikeRuinsTheRunWithoutThePolicyAndIsRewoundWithIt) {
  int status = 0;
  const std::string undisturbed_out = run_demo("", status);
  ASSERT_EQ(status, 0) << undisturbed_out;
  const double undisturbed = final_loss(undisturbed_out);
  ASSERT_TRUE(std::isfinite(undisturbed)) << undisturbed_out;

  const std::string spiked_out = run_demo("--lr-spike 150:1000 --rewind-every 50", status);
  ASSERT_EQ(status, 0) << spiked_out;
  const double spiked = final_loss(spiked_out);
  EXPECT_GT(spiked, 1.2 * undisturbed) << "without the policy the spike's damage stays: " << spiked_out;
  EXPECT_EQ(spiked_out.find("event rewind"), std::string::npos);

  const std::string healed_out = run_demo("--lr-spike 150:1000 --rewind-every 50 --rewind-on-divergence", status);
  ASSERT_EQ(status, 0) << healed_out;
  const double healed = final_loss(healed_out);
  EXPECT_LT(std::abs(healed - undisturbed), 0.05 * undisturbed)
      << "healed " << healed << ", undisturbed " << undisturbed << "\n" << healed_out;
  EXPECT_NE(healed_out.find("to step 150 (the rewind policy, 1 of at most 3: the loss above 2x its median"),
            std::string::npos)
      << healed_out;
  EXPECT_EQ(healed_out.find("rewind_stopped"), std::string::npos) << healed_out;
}

TEST(RewindE2e, ARunThatDivergesAfterEveryRewindStopsAtTheCapAndSaysWhy) {
  int status = 0;
  const std::string out = run_demo("--cause lr:150 --rewind-every 50 --rewind-on-divergence --rewind-max 2", status);
  ASSERT_EQ(status, 0) << out;
  EXPECT_NE(out.find("(the rewind policy, 1 of at most 2"), std::string::npos) << out;
  EXPECT_NE(out.find("(the rewind policy, 2 of at most 2"), std::string::npos) << out;
  const size_t stopped = out.find("event rewind_stopped");
  ASSERT_NE(stopped, std::string::npos) << out;
  EXPECT_NE(out.find("after 2 rewinds (rewind_max): not rewinding", stopped), std::string::npos) << out;
  EXPECT_NE(out.find("a lower learning rate", stopped), std::string::npos) << out;
  EXPECT_EQ(out.find("event rewind_stopped", stopped + 1), std::string::npos) << "said more than once: " << out;
  EXPECT_EQ(out.find("learning rate x"), std::string::npos) << "cut without rewind_lr_factor: " << out;

  // With rewind_lr_factor the second and third rewinds also cut the learning rate, each x0.1:
  // the run that diverged again and again finishes healthy. Each rewind writes the state it put back.
  const std::string cut_out = run_demo(
      "--cause lr:150 --rewind-every 50 --rewind-on-divergence --rewind-max 3 --rewind-lr-factor 0.1", status);
  ASSERT_EQ(status, 0) << cut_out;
  const size_t first = cut_out.find("(the rewind policy, 1 of at most 3");
  const size_t second = cut_out.find("(the rewind policy, 2 of at most 3");
  ASSERT_NE(first, std::string::npos) << cut_out;
  ASSERT_NE(second, std::string::npos) << cut_out;
  EXPECT_EQ(cut_out.substr(first, second - first).find("learning rate x"), std::string::npos)
      << "the first rewind keeps the learning rate: " << cut_out;
  EXPECT_NE(cut_out.find("learning rate x0.1 (rewind_lr_factor)", second), std::string::npos) << cut_out;
  EXPECT_NE(cut_out.find("step-150-rewind"), std::string::npos) << "the rewound state was not dumped: " << cut_out;
  EXPECT_EQ(cut_out.find("rewind_stopped"), std::string::npos) << "diverged after the cut: " << cut_out;
  const double healed = final_loss(cut_out), before = median_before_divergence(cut_out);
  ASSERT_TRUE(std::isfinite(healed) && std::isfinite(before)) << cut_out;
  EXPECT_LT(healed, 1.5 * before) << cut_out;
}

// The cause looks back far enough: one step's learning rate x100000 at step 150 leaves every
// value finite until the run blows up some 160 steps later, and that blow-up is the learning
// rate's, not a batch's.
TEST(RewindE2e, ABlowUpLongAfterALearningRateSpikeIsToldAsTheLearningRate) {
  int status = 0;
  const std::string out = run_demo("--lr-spike 150:100000", status);
  ASSERT_EQ(status, 0) << out;
  const size_t cause = out.find(" cause ");
  ASSERT_NE(cause, std::string::npos) << "no blow-up with a cause: " << out;
  const size_t line_end = out.find('\n', cause);
  const std::string line = out.substr(cause, line_end - cause);
  EXPECT_NE(line.find(" cause learning_rate"), std::string::npos) << line;
  EXPECT_NE(line.find("at step 150"), std::string::npos) << line;
}

}  // namespace
