// The dashboard's side of a rewind (issue 59) in a real X window (Xvfb), with a fake probe: a
// publisher sends a run whose records say it keeps snapshots, the Rewind button and its
// confirmation are clicked for real (xdotool) and a fake command server receives the "rewind"
// command; then the publisher rewinds (a rewind event, steps 100..150 again with other values)
// and the dashboard must store the continuation and keep the abandoned steps 100..199. A second
// dashboard, headless (--screenshot ignores the pointer, so the clicks need the first), shows
// the same rewind: the abandoned span greyed on the heatmap beside the continuation (pixels).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "child_process.hpp"
#include "fake_command_server.hpp"
#include "heatmap_geometry.hpp"
#include "keel/wire/vocabulary.hpp"
#include "test_publisher.hpp"

#define STB_IMAGE_IMPLEMENTATION
#include <stb_image.h>

namespace {

namespace wire = keel::wire;
using keel::app::test_support::FakeCommandServer;
using keel::app::test_support::ServerAuth;
using keel::app::test_support::TestPublisher;
using keel::e2e::ChildProcess;
using keel::e2e::run_command;

constexpr uint32_t kLayers = 4;
// Long enough for the rewind to arrive on a loaded machine; the view is [0, 400] then.
constexpr int kScreenshotSecs = 15;

wire::RunDescription rewound_run() {
  wire::RunDescription run;
  run.run_id = "rewound";
  run.world_size = 1;
  for (uint32_t l = 0; l < kLayers; ++l) run.layers.push_back({"blocks." + std::to_string(l) + ".weight", {8}, 8, "float32"});
  return run;
}

// Every layer metric of every layer `value`; the loss too.
wire::StepRecord record(int64_t step, uint64_t seq, float value) {
  wire::StepRecord r;
  r.run = "rewound";
  r.seq = seq;
  r.step = step;
  r.loss = value;
  r.grad_norm = value;
  r.snapshot_bytes = 48200000;
  r.layer_count = kLayers;
  r.layer_values.assign(kLayers * wire::kLayerMetricCount, value);
  return r;
}

struct Rect {
  float x0 = 0, y0 = 0, x1 = 0, y1 = 0;
};

bool parse_rect(const std::string& line, const std::string& what, Rect& r) {
  const size_t at = line.find("keel: control " + what + " x0 ");
  return at != std::string::npos && std::sscanf(line.c_str() + at + 14 + what.size(), " x0 %f y0 %f x1 %f y1 %f",
                                                &r.x0, &r.y0, &r.x1, &r.y1) == 4;
}

// Sends the run description and step 0 until `keel` draws the run (a PUB socket drops what it
// sends before the subscription), then steps 1..199; returns the next seq.
uint64_t publish_run(TestPublisher& probe, ChildProcess& keel) {
  const wire::RunDescription run = rewound_run();
  uint64_t seq = 1;
  for (int i = 0; keel.wait_for("keel: heatmap", 0.1).empty(); ++i) {
    EXPECT_LT(i, 300) << keel.output();
    if (i >= 300) return seq;
    wire::RunDescription again = run;
    again.seq = seq++;
    probe.send(again);
    probe.send(record(0, seq++, 0.01f));
  }
  for (int64_t step = 1; step < 200; ++step) probe.send(record(step, seq++, 0.01f));
  return seq;
}

// The probe rewinds from 199 to 100 and goes on from there to 150 with other values.
void publish_rewind(TestPublisher& probe, uint64_t seq) {
  wire::Event event;
  event.run = "rewound";
  event.seq = seq++;
  event.step = 199;
  event.kind = wire::event_kind::kRewind;
  event.detail = "rewound from step 199 to step 100 (a command)";
  probe.send(event);
  for (int64_t step = 100; step <= 150; ++step) probe.send(record(step, seq++, 100.0f));
}

TEST(RewindGui, TheButtonAndItsConfirmationSendARewindAndTheContinuationIsStored) {
  TestPublisher probe(ServerAuth::kUsersOwnKey);
  // Commands go to the command socket beside the telemetry endpoint (port + 1).
  const std::string command_endpoint =
      "tcp://127.0.0.1:" + std::to_string(keel::app::test_support::port_of(probe.endpoint()) + 1);
  FakeCommandServer commands(
      [](const wire::Command& command) -> std::vector<wire::Message> {
        return {FakeCommandServer::ack_for(command, command.kind == wire::command_kind::kRewind, 100)};
      },
      command_endpoint, ServerAuth::kUsersOwnKey);
  ChildProcess keel({KEEL_PATH, "--verbose", "--connect", probe.endpoint()});
  const uint64_t seq = publish_run(probe, keel);
  Rect rewind;
  ASSERT_TRUE(parse_rect(keel.find_or_wait_for("keel: control rewind", 30), "rewind", rewind)) << keel.output();

  const std::string window = run_command("xdotool search --sync --limit 1 --name '^keel$'");
  ASSERT_FALSE(window.empty());
  // Focused and hovered before the press (control_gui_test.cpp says why); tried again when a
  // loaded machine lost the input.
  const auto act = [&](const Rect& r, const std::string& needle) {
    for (int attempt = 0; attempt < 4; ++attempt) {
      run_command("xdotool windowfocus --sync " + window + " mousemove --window " + window + " 5 5 sleep 0.2 mousemove --window " + window + " " +
                  std::to_string(int((r.x0 + r.x1) / 2)) + " " + std::to_string(int((r.y0 + r.y1) / 2)) +
                  " sleep 0.3 click 1");
      const std::string line = keel.wait_for(needle, 5);
      if (!line.empty()) return line;
    }
    return std::string();
  };
  ASSERT_FALSE(act(rewind, "keel: clicked Rewind").empty()) << keel.output();
  Rect confirm;
  ASSERT_TRUE(parse_rect(keel.find_or_wait_for("keel: control confirm-rewind", 30), "confirm-rewind", confirm))
      << keel.output();
  // The first frame of a popup may place it before its size is known: the last line logged wins.
  const std::string settled = keel.wait_for("keel: control confirm-rewind", 1);
  if (!settled.empty()) {
    ASSERT_TRUE(parse_rect(settled, "confirm-rewind", confirm));
  }
  ASSERT_FALSE(act(confirm, "keel: clicked Rewind (to step -1)").empty()) << keel.output();
  const std::string ack = keel.wait_for("keel: command rewind id", 30);
  EXPECT_NE(ack.find("acknowledged at step 100"), std::string::npos) << keel.output();
  // The dashboard also asks the command socket for the run's history (backfill): the rewind is
  // the one command of its kind.
  std::vector<wire::Command> rewinds;
  for (const wire::Command& c : commands.received()) {
    if (c.kind == wire::command_kind::kRewind) rewinds.push_back(c);
  }
  ASSERT_EQ(rewinds.size(), 1u);
  EXPECT_EQ(rewinds[0].to_step, -1) << "to the newest snapshot";

  publish_rewind(probe, seq);
  EXPECT_FALSE(keel.wait_for("abandoned span 100 to 199, continued to step 150", 30).empty()) << keel.output();
}

TEST(RewindGui, TheAbandonedSpanIsGreyedOnTheHeatmapBesideTheContinuation) {
  TestPublisher probe(ServerAuth::kUsersOwnKey);
  const std::string png = ::testing::TempDir() + "/keel_rewind_gui.png";
  std::remove(png.c_str());
  ChildProcess keel({KEEL_PATH, "--verbose", "--connect", probe.endpoint(), "--screenshot", png, "--screenshot-after",
                     std::to_string(kScreenshotSecs)});
  publish_rewind(probe, publish_run(probe, keel));
  EXPECT_FALSE(keel.wait_for("abandoned span 100 to 199, continued to step 150", 30).empty()) << keel.output();
  ASSERT_FALSE(keel.find_or_wait_for("keel: screenshot", 90).empty()) << keel.output();
  EXPECT_EQ(keel.wait_exit(), 0);
  keel::e2e::HeatmapGeometry heatmap;
  const std::string output = keel.output();
  ASSERT_TRUE(keel::e2e::parse_geometry(output.substr(output.rfind("keel: heatmap")), heatmap)) << output;
  int width = 0, height = 0, channels = 0;
  unsigned char* pixels = stbi_load(png.c_str(), &width, &height, &channels, 3);
  ASSERT_NE(pixels, nullptr) << "cannot read " << png;
  // The view follows the newest step shown (199): steps 0 to 400, one column each.
  // A step's cell is one column of about two pixels, the gap between cells the no-data colour:
  // the first pixel of the step's column that is not the gap.
  const auto pixel = [&](int64_t step, int row) {
    const int y = int(heatmap.y0 + (float(row) + 0.5f) * heatmap.row);
    const int x = int(heatmap.x0 + float(step) * (heatmap.x1 - heatmap.x0) / 401.0f);
    for (int dx = 0; dx < 3; ++dx) {
      const unsigned char* p = pixels + (size_t(y) * size_t(width) + size_t(x + dx)) * 3;
      const std::vector<int> rgb{p[0], p[1], p[2]};
      if (rgb != std::vector<int>{30, 30, 38}) return rgb;
    }
    return std::vector<int>{30, 30, 38};
  };

  // Of the pixels of row `row` across steps [first, last]: how many are grey (r = g = b, lighter
  // than the heatmap's no-data colour). The abandoned span is hatched: every other column grey.
  const auto grey_pixels = [&](int64_t first, int64_t last, int row) {
    int grey = 0;
    const int y = int(heatmap.y0 + (float(row) + 0.5f) * heatmap.row);
    for (int x = int(heatmap.x0 + float(first) * (heatmap.x1 - heatmap.x0) / 401.0f);
         x <= int(heatmap.x0 + float(last + 1) * (heatmap.x1 - heatmap.x0) / 401.0f); ++x) {
      const unsigned char* p = pixels + (size_t(y) * size_t(width) + size_t(x)) * 3;
      grey += p[0] == p[1] && p[1] == p[2] && p[0] >= 50;
    }
    return grey;
  };
  for (int row = 0; row < int(kLayers); ++row) {
    // The abandoned steps past the continuation (160..190, about 60 pixels): hatched grey.
    EXPECT_GE(grey_pixels(160, 190, row), 20) << "row " << row << ": the abandoned span is not greyed";
    // Past the abandoned span (no step ever): the no-data colour, no hatch.
    EXPECT_EQ(grey_pixels(260, 290, row), 0) << "row " << row;
    // The continuation (100) and the steps before (0.01) in colour, at the two ends of the scale.
    const std::vector<int> continued = pixel(125, row), before = pixel(50, row);
    EXPECT_FALSE(continued[0] == continued[1] && continued[1] == continued[2]) << "row " << row;
    EXPECT_FALSE(before[0] == before[1] && before[1] == before[2]) << "row " << row;
    EXPECT_NE(continued, before) << "row " << row;
  }
  stbi_image_free(pixels);
}

}  // namespace
