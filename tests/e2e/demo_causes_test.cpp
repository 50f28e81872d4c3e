// keel-demo's six causes (--cause KIND:STEP), each made through the real math of training, and
// keel's cause of each as the demo prints it from the first_nonfinite (or spike) event: the
// kind and the module, through the real probe in the real trainer (issue 28, DESIGN §2.1).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "child_process.hpp"

namespace {

using keel::e2e::ChildProcess;

struct Case {
  std::string cause;      // --cause
  std::string kind;       // keel's cause kind
  std::string module;     // the module named ("" = any, but one must be named)
  std::string sentence;   // a part of the sentence
  std::vector<std::string> extra_flags;
};

// The demo's output line "keel-demo: step S cause KIND MODULE: SENTENCE" of the cause's step.
std::string cause_line(const Case& c, int64_t step, std::string& output) {
  std::vector<std::string> argv = {KEEL_DEMO_PATH, "--cause", c.cause, "--steps", std::to_string(step + 3),
                                   "--endpoint", "", "--log-every", "0", "--no-dump-nonfinite"};
  argv.insert(argv.end(), c.extra_flags.begin(), c.extra_flags.end());
  ChildProcess demo(argv);
  const std::string line = demo.wait_for("cause " + c.kind + " ", 120);
  demo.wait_exit();
  output = demo.output();
  return line;
}

void expect_cause(const Case& c, int64_t step) {
  std::string output;
  const std::string line = cause_line(c, step, output);
  ASSERT_FALSE(line.empty()) << "--cause " << c.cause << ": no cause " << c.kind << " in:\n" << output;
  const std::string prefix = "keel-demo: step " + std::to_string(step) + " cause " + c.kind + " ";
  EXPECT_EQ(line.rfind(prefix, 0), 0u) << line;
  const std::string module = line.substr(prefix.size(), line.find(':', prefix.size()) - prefix.size());
  EXPECT_FALSE(module.empty()) << line;
  if (!c.module.empty()) {
    EXPECT_EQ(module, c.module) << line;
  }
  EXPECT_NE(line.find(c.sentence), std::string::npos) << line;
}

TEST(DemoCauses, AttentionLogitsThatOverflowAreTheForwardPassInTheQueryKeyProjection) {
  expect_cause({"attention:5", "forward", "blocks.1.attn.qkv", "aten::matmul in blocks.1.attn.qkv at step 5", {}}, 5);
}

TEST(DemoCauses, ANormOverAConstantRowWithEpsZeroIsTheForwardPassInTheNorm) {
  expect_cause({"norm:5", "forward", "blocks.0.attn.q_norm", "with eps 0", {}}, 5);
}

TEST(DemoCauses, AnFp16LossScaleThatOverflowsIsTheLossScale) {
  expect_cause({"fp16:5", "loss_scale", "", "scaled by 6.55e+04 overflowed", {}}, 5);
}

TEST(DemoCauses, APoisonedBatchIsTheBatch) {
  expect_cause({"batch:5", "batch", "", "overflows float32", {}}, 5);
}

TEST(DemoCauses, ALearningRateSpikeThatDivergesIsTheLearningRate) {
  expect_cause({"lr:20", "learning_rate", "", "rose 1.05e+03x at step 20 (0.0006 to 0.63), and the run diverged",
                {"--spike-warmup", "8", "--spike-window", "16"}},
               21);
}

TEST(DemoCauses, NonFiniteInputDataIsTheInput) {
  expect_cause({"input:5", "input", "", "the batch carries NaN or Inf", {}}, 5);
}

// The plain probe.step(loss) traces no op: the attention's NaN is told as the forward pass,
// with no layer near the loss taken for its origin.
TEST(DemoCauses, ThePlainStepSaysForwardPassAndAsksForTheClosure) {
  std::string output;
  const Case c{"attention:5", "forward", "", "probe.step(closure)", {"--plain-step"}};
  const std::string line = cause_line(c, 5, output);
  ASSERT_FALSE(line.empty()) << output;
  EXPECT_NE(line.find("keel-demo: step 5 cause forward : NaN born in the forward pass"), std::string::npos) << line;
  EXPECT_NE(line.find("probe.step(closure)"), std::string::npos) << line;
}

}  // namespace
