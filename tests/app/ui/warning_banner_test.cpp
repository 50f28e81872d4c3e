// The warning banner's words: where the trend is, its numbers and lead, the advice, and whose
// run it is when the panes show another.
#include "ui/warning_banner.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "keel/wire/vocabulary.hpp"

namespace keel::app::ui {
namespace {

wire::Event warning_event() {
  wire::Event event;
  event.step = 120;
  event.kind = wire::event_kind::kWarning;
  event.layer = "blocks.0.attn.qkv.weight";
  event.detail = "update ratio / lr of blocks.0.attn.qkv.weight 2.6x its baseline 0.031 and rising 4% a step";
  event.warning = wire::Warning{"update_ratio", 0.0806, 0.031, 0.04, 35, "lower the learning rate or lengthen the warmup"};
  return event;
}

TEST(WarningBanner, ItsLinesSayWhereTheNumbersTheLeadAndTheAdvice) {
  const RunModel run("demo-run", 0, ModelConfig{});
  EXPECT_EQ(warning_banner_lines(warning_event(), run, &run),
            (std::vector<std::string>{"Warning at step 120: update_ratio of blocks.0.attn.qkv.weight",
                                      "0.0806, 2.6x its baseline 0.031, rising 4.08% a step; may diverge in ~35 steps",
                                      "Advice: lower the learning rate or lengthen the warmup"}));
}

TEST(WarningBanner, AWarningOfAnotherRunSaysWhoseAndOneWithoutNumbersItsSentence) {
  const RunModel shown("demo-run", 0, ModelConfig{});
  const RunModel other("demo-run", 1, ModelConfig{});
  const std::vector<std::string> lines = warning_banner_lines(warning_event(), other, &shown);
  EXPECT_EQ(lines[0], "Warning at step 120: update_ratio of blocks.0.attn.qkv.weight, demo-run rank 1");
  wire::Event bare = warning_event();
  bare.warning.reset();
  bare.layer.clear();
  EXPECT_EQ(warning_banner_lines(bare, shown, &shown),
            (std::vector<std::string>{"Warning at step 120: a trend that usually ends in a divergence", bare.detail}));
  wire::Event global = warning_event();
  global.layer.clear();
  global.warning->signal = "grad_norm";
  global.warning->advice.clear();
  EXPECT_EQ(warning_banner_lines(global, shown, &shown).size(), 2u) << "no advice, no advice line";
  EXPECT_EQ(warning_banner_lines(global, shown, &shown)[0], "Warning at step 120: grad_norm of the run");
}

}  // namespace
}  // namespace keel::app::ui
