// The controls' bookkeeping without a window: what each control shows for its last command,
// policy states ("unknown" until the user's ack or the probe's policy event says), and the
// finished commands the events pane lists.
#include "ui/control_state.hpp"

#include <deque>

#include <gtest/gtest.h>

namespace keel::app::ui {
namespace {

namespace wire = keel::wire;

CommandStatus answered(uint64_t id, const wire::Command& command, CommandState state, int64_t step) {
  CommandStatus status;
  status.id = id;
  status.command = command;
  status.state = state;
  status.ack.id = id;
  status.ack.ok = state == CommandState::kAcknowledged;
  status.ack.step = step;
  return status;
}

wire::Command policy(const std::string& name, bool enable) {
  wire::Command command;
  command.kind = "policy";
  command.policy = name;
  command.enable = enable;
  return command;
}

TEST(ControlState, EachControlShowsWhatBecameOfItsLastCommand) {
  ControlState state;
  wire::Command skip;
  skip.kind = "skip";
  state.submitted("skip", 1, skip);
  ASSERT_NE(state.latest("skip"), nullptr);
  EXPECT_EQ(status_text(*state.latest("skip")), "pending");
  state.update(answered(1, skip, CommandState::kAcknowledged, 812));
  EXPECT_EQ(status_text(*state.latest("skip")), "skipped step 812");
  ASSERT_EQ(state.log().size(), 1u);
  EXPECT_EQ(state.log()[0].step, 812);
  EXPECT_EQ(state.log()[0].text, "skipped step 812");

  wire::Command dump;
  dump.kind = "dump";
  state.submitted("dump", 2, dump);
  CommandStatus done = answered(2, dump, CommandState::kAcknowledged, 90);
  done.ack.path = "/dumps/step-90";
  done.ack.bytes = 3 * 1024 * 1024;
  state.update(done);
  EXPECT_EQ(status_text(*state.latest("dump")), "dump at step 90: /dumps/step-90 (3 MB)");
  EXPECT_EQ(state.log()[0].path, "/dumps/step-90") << "the events pane copies it whole";
  EXPECT_EQ(state.log()[1].path, "") << "a skip has no path";

  state.submitted("dump", 3, dump);
  CommandStatus refused = answered(3, dump, CommandState::kRefused, -1);
  refused.error = "at most one dump per 100 steps";
  state.update(refused);
  EXPECT_EQ(status_text(*state.latest("dump")), "refused: at most one dump per 100 steps");
  EXPECT_EQ(state.log()[0].step, -1);
  EXPECT_EQ(state.log()[0].path, "") << "a refused dump wrote nothing";
  EXPECT_EQ(state.log().size(), 3u);
}

TEST(ControlState, ATimedOutCommandShowsItsLateAck) {
  ControlState state;
  wire::Command skip;
  skip.kind = "skip";
  state.submitted("skip", 4, skip);
  CommandStatus timed_out = answered(4, skip, CommandState::kTimedOut, -1);
  timed_out.error = "no answer within 10 s";
  state.update(timed_out);
  EXPECT_EQ(status_text(*state.latest("skip")), "timed out: no answer within 10 s");
  CommandStatus late = answered(4, skip, CommandState::kAcknowledged, 30);
  late.answered_late = true;
  state.update(late);
  EXPECT_EQ(status_text(*state.latest("skip")), "skipped step 30 (answered after the timeout)");
  EXPECT_EQ(state.log().size(), 2u);
}

TEST(ControlState, PoliciesAreUnknownUntilAnAckOrAnEventSays) {
  ControlState state;
  for (const char* name : wire::kPolicyNames) EXPECT_EQ(state.policy(name), PolicyState::kUnknown);
  state.submitted("policy skip_spike", 5, policy("skip_spike", true));
  EXPECT_EQ(state.policy("skip_spike"), PolicyState::kUnknown);
  state.update(answered(5, policy("skip_spike", true), CommandState::kAcknowledged, 7));
  EXPECT_EQ(state.policy("skip_spike"), PolicyState::kOn);

  // Newest first, as the run keeps them; another client switched dump_nonfinite off then on.
  std::deque<wire::Event> events;
  wire::Event off;
  off.seq = 10;
  off.kind = "policy";
  off.detail = "dump_nonfinite off from step 3 (command 9)";
  wire::Event on = off;
  on.seq = 11;
  on.detail = "dump_nonfinite on from step 4 (command 10)";
  events.push_front(off);
  events.push_front(on);
  state.note_events(events);
  EXPECT_EQ(state.policy("dump_nonfinite"), PolicyState::kOn);
  wire::Event nonfinite_off = off;
  nonfinite_off.seq = 12;
  nonfinite_off.detail = "skip_nonfinite off from step 5 (command 11)";
  events.push_front(nonfinite_off);
  state.note_events(events);
  EXPECT_EQ(state.policy("skip_nonfinite"), PolicyState::kOff);

  state.new_run();
  EXPECT_EQ(state.policy("skip_spike"), PolicyState::kUnknown);
}

// A probe that reports its policies in the run description: known from the first one, each
// description read once, so an ack that lands before the next description is not undone.
TEST(ControlState, TheRunDescriptionTellsThePoliciesAtOnce) {
  ControlState state;
  wire::RunDescription run;
  run.seq = 1;
  state.note_description(run);
  EXPECT_EQ(state.policy("skip_nonfinite"), PolicyState::kUnknown) << "this probe does not report them";

  run.seq = 2;
  run.policies_on = std::vector<std::string>{"skip_nonfinite", "dump_nonfinite"};
  state.note_description(run);
  EXPECT_EQ(state.policy("skip_nonfinite"), PolicyState::kOn);
  EXPECT_EQ(state.policy("skip_spike"), PolicyState::kOff);
  EXPECT_EQ(state.policy("dump_nonfinite"), PolicyState::kOn);

  state.submitted("policy skip_spike", 5, policy("skip_spike", true));
  state.update(answered(5, policy("skip_spike", true), CommandState::kAcknowledged, 7));
  state.note_description(run);   // the same description, read again next frame
  EXPECT_EQ(state.policy("skip_spike"), PolicyState::kOn);
  run.seq = 3;
  run.policies_on = std::vector<std::string>{"skip_spike"};   // re-sent after the change (and another client's)
  state.note_description(run);
  EXPECT_EQ(state.policy("skip_spike"), PolicyState::kOn);
  EXPECT_EQ(state.policy("skip_nonfinite"), PolicyState::kOff);

  state.new_run();
  EXPECT_EQ(state.policy("skip_spike"), PolicyState::kUnknown);
}

}  // namespace
}  // namespace keel::app::ui
