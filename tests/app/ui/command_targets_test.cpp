// Command targets with several ranks: a control's command goes to the endpoint carrying the
// shown rank (a live one first), a skip goes to one endpoint per rank, and the step a skip of
// every rank names is ahead of the newest step any rank reported, by a second of
// training at least and never less than kMinSkipLeadSteps.
#include "ui/command_targets.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace keel::app::ui {
namespace {

EndpointState link(const std::string& endpoint, int32_t rank, LinkState state = LinkState::kLive) {
  EndpointState s;
  s.endpoint = endpoint;
  s.rank = rank;
  s.state = state;
  return s;
}

TEST(CommandTargets, OneEndpointNamesNoRank) {
  const auto target = target_for_rank({link("tcp://a:1", 3)}, 3);
  ASSERT_TRUE(target);
  EXPECT_EQ(target->endpoint, "tcp://a:1");
  EXPECT_EQ(target->rank, -1);
  EXPECT_FALSE(target_for_rank({}, 0));
}

TEST(CommandTargets, TheShownRanksEndpointAndALiveOneFirst) {
  const std::vector<EndpointState> links = {link("tcp://r0:1", 0), link("tcp://r1-old:1", 1, LinkState::kStale),
                                            link("tcp://r1:1", 1), link("tcp://r2:1", 2)};
  EXPECT_EQ(target_for_rank(links, 1)->endpoint, "tcp://r1:1");
  EXPECT_EQ(target_for_rank(links, 1)->rank, 1);
  EXPECT_EQ(target_for_rank(links, 2)->endpoint, "tcp://r2:1");
  // A rank no endpoint has carried yet: the first live endpoint, still addressed to that rank
  // so that a probe of another rank refuses it.
  const auto unknown = target_for_rank(links, 7);
  EXPECT_EQ(unknown->endpoint, "tcp://r0:1");
  EXPECT_EQ(unknown->rank, 7);
}

TEST(CommandTargets, EveryRankOnceInRankOrder) {
  const std::vector<EndpointState> links = {link("tcp://r2:1", 2), link("tcp://r0:1", 0),
                                            link("tcp://quiet:1", -1, LinkState::kConnecting),
                                            link("tcp://r0-old:1", 0, LinkState::kStale)};
  const std::vector<CommandTarget> targets = every_rank(links);
  ASSERT_EQ(targets.size(), 2u);
  EXPECT_EQ(targets[0].rank, 0);
  EXPECT_EQ(targets[0].endpoint, "tcp://r0:1");
  EXPECT_EQ(targets[1].rank, 2);
}

wire::StepRecord record(int32_t rank, int64_t step, int64_t stamp_ns) {
  wire::StepRecord r;
  r.rank = rank;
  r.step = step;
  r.stamp_unix_ns = stamp_ns;
  return r;
}

TEST(CommandTargets, TheSkipStepIsAheadOfTheNewestRankByASecond) {
  Model model;
  // Rank 0 at 20 steps/s up to step 100; rank 1 one step behind.
  for (int64_t s = 0; s <= 100; ++s) model.ingest(record(0, s, s * 50'000'000));
  for (int64_t s = 0; s <= 99; ++s) model.ingest(record(1, s, s * 50'000'000));
  EXPECT_EQ(synchronized_skip_step(model), 100 + 1 + 20);   // a second is 20 steps
  // A slow trainer still gets kMinSkipLeadSteps.
  Model slow;
  for (int64_t s = 0; s <= 20; ++s) slow.ingest(record(0, s, s * 2'000'000'000));
  EXPECT_EQ(synchronized_skip_step(slow), 20 + 1 + kMinSkipLeadSteps);
}

}  // namespace
}  // namespace keel::app::ui
