#include "model/first_cause.hpp"

#include <gtest/gtest.h>

namespace keel::app {
namespace {

wire::Event traced() {
  wire::Event e;
  e.kind = "first_nonfinite";
  e.layer = "blocks.2.route.weight";
  e.cause = wire::Cause{"forward", "aten::log", "blocks.2.route", "log of a value that underflowed to 0",
                        "Inf born in the forward pass: aten::log in blocks.2.route at step 25"};
  return e;
}

TEST(FirstCause, TheSentenceIsTheProbesAndAnOlderProbeHasNone) {
  EXPECT_EQ(cause_sentence(traced()), "Inf born in the forward pass: aten::log in blocks.2.route at step 25");
  wire::Event older = traced();
  older.cause.reset();
  EXPECT_EQ(cause_sentence(older), "");
  EXPECT_FALSE(cause_is_about(older, "blocks.2.route.weight"));
}

TEST(FirstCause, ItIsAboutTheParametersOfItsModuleOnly) {
  const wire::Event e = traced();
  EXPECT_TRUE(cause_is_about(e, "blocks.2.route.weight"));
  EXPECT_TRUE(cause_is_about(e, "blocks.2.route.bias"));
  EXPECT_FALSE(cause_is_about(e, "blocks.2.router.bias"));
  EXPECT_FALSE(cause_is_about(e, "blocks.2.fc.weight"));
  EXPECT_FALSE(cause_is_about(e, ""));
}

TEST(FirstCause, ACauseWithNoModuleIsAboutItsLayerOnly) {
  wire::Event e = traced();
  e.cause->module = "";
  e.layer = "";
  EXPECT_FALSE(cause_is_about(e, "blocks.2.route.weight")) << "a forward pass NaN with no op traced names no layer";
  e.layer = "head.weight";
  EXPECT_TRUE(cause_is_about(e, "head.weight"));
}

}  // namespace
}  // namespace keel::app
