// An alert as its command reads it (one JSON object) and as a person reads it (one line).
#include "alert/alert_json.hpp"

#include <gtest/gtest.h>

#include "alert/alert_line.hpp"

namespace keel::app {
namespace {

using Json = nlohmann::ordered_json;

Alert warning_alert() {
  wire::Event event;
  event.rank = 1;
  event.seq = 77;
  event.run = "demo-run";
  event.step = 120;
  event.kind = wire::event_kind::kWarning;
  event.layer = "blocks.0.attn.qkv.weight";
  event.detail = "update ratio / lr of blocks.0.attn.qkv.weight 2.6x its baseline 0.031 and rising 4% a step";
  event.warning = wire::Warning{"update_ratio", 0.0806, 0.031, 0.04, 35, "lower the learning rate"};
  Alert alert;
  alert.kind = event.kind;
  alert.rank = event.rank;
  alert.run = event.run;
  alert.step = event.step;
  alert.event = event;
  alert.suppressed = 3;
  return alert;
}

TEST(AlertJson, AnEventsAlertIsTheEventAsTailPrintsItAndWhatWasHeldBack) {
  const Json json = Json::parse(alert_json_line(warning_alert()));
  EXPECT_EQ(json["type"], "event");
  EXPECT_EQ(json["kind"], "warning");
  EXPECT_EQ(json["rank"], 1);
  EXPECT_EQ(json["seq"], 77);
  EXPECT_EQ(json["step"], 120);
  EXPECT_EQ(json["layer"], "blocks.0.attn.qkv.weight");
  EXPECT_EQ(json["warning"]["signal"], "update_ratio");
  EXPECT_DOUBLE_EQ(json["warning"]["value"].get<double>(), 0.0806);
  EXPECT_EQ(json["warning"]["lead_steps"], 35);
  EXPECT_EQ(json["warning"]["advice"], "lower the learning rate");
  EXPECT_EQ(json["suppressed"], 3);
}

TEST(AlertJson, ASilenceIsTheWatchersOwnWithTheKeysAnEventHas) {
  Alert alert;
  alert.kind = kSilentAlertKind;
  alert.rank = 0;
  alert.run = "demo-run";
  alert.step = 4512;
  alert.silent_secs = 121.4;
  alert.stamp_unix_ns = 1700000000000000000;
  const Json json = alert_json(alert);
  EXPECT_EQ(json["type"], "watcher");
  EXPECT_EQ(json["kind"], "silent");
  EXPECT_EQ(json["rank"], 0);
  EXPECT_EQ(json["run"], "demo-run");
  EXPECT_EQ(json["step"], 4512);
  EXPECT_DOUBLE_EQ(json["silent_secs"].get<double>(), 121.4);
  EXPECT_EQ(json["detail"],
            "no step or event from rank 0 of run demo-run for 121 s after step 4512; the trainer may have died, hung "
            "or ended");
  EXPECT_EQ(json["suppressed"], 0);
  EXPECT_EQ(json["stamp_unix_ns"], 1700000000000000000);
}

TEST(AlertLine, OneLineWithKindStepRankRunLayerDetailAndHeldBack) {
  EXPECT_EQ(alert_line(warning_alert()),
            "alert warning step 120 rank 1 run demo-run layer blocks.0.attn.qkv.weight: update ratio / lr of "
            "blocks.0.attn.qkv.weight 2.6x its baseline 0.031 and rising 4% a step (3 more held back since the last)");
  Alert bare = warning_alert();
  bare.event->detail.clear();
  bare.suppressed = 0;
  EXPECT_EQ(alert_line(bare),
            "alert warning step 120 rank 1 run demo-run layer blocks.0.attn.qkv.weight: update_ratio 0.0806, 2.6x its "
            "baseline 0.031, rising 4.08% a step; may diverge in ~35 steps");
  Alert hostile = warning_alert();
  hostile.event->detail = "\x1b[2Jcleared\nsecond line";
  const std::string line = alert_line(hostile);
  EXPECT_EQ(line.find('\x1b'), std::string::npos);
  EXPECT_EQ(line.find('\n'), std::string::npos) << "one line, whatever the detail holds";
}

}  // namespace
}  // namespace keel::app
