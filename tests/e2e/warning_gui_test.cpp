// The forecaster's warning in the real dashboard (Xvfb), with a fake probe: a published warning
// shows its banner above the charts (its amber in the screenshot's pixels, its words in the
// --verbose log), its step is marked on the charts, and --alert-command runs with its JSON; the
// banner's Dismiss button, clicked for real, hides it until a newer warning comes; and a
// recording opened with --open shows the banner of the warning it holds.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "child_process.hpp"
#include "keel/wire/codec.hpp"
#include "keel/wire/recording_writer.hpp"
#include "keel/wire/vocabulary.hpp"
#include "test_publisher.hpp"

#define STB_IMAGE_IMPLEMENTATION
#include <stb_image.h>

namespace {

namespace fs = std::filesystem;
namespace wire = keel::wire;
using keel::app::test_support::ServerAuth;
using keel::app::test_support::TestPublisher;
using keel::e2e::ChildProcess;
using keel::e2e::run_command;

constexpr uint32_t kLayers = 4;
// The banner's background and the warning step's marker (ui/warning_banner.cpp, ui/plot.hpp).
constexpr int kBanner[3] = {110, 72, 8};
constexpr int kMarker[3] = {255, 190, 40};

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("keel-warning-gui-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path path = dir / name;
  fs::remove(path);
  return path;
}

wire::RunDescription warned_run() {
  wire::RunDescription run;
  run.run_id = "warned";
  run.world_size = 1;
  for (uint32_t l = 0; l < kLayers; ++l) run.layers.push_back({"blocks." + std::to_string(l) + ".weight", {8}, 8, "float32"});
  return run;
}

wire::StepRecord record(int64_t step, uint64_t seq) {
  wire::StepRecord r;
  r.run = "warned";
  r.seq = seq;
  r.step = step;
  r.loss = 3.0 / (1.0 + 0.01 * double(step));
  r.grad_norm = 1.0 + 0.01 * double(step);
  r.layer_count = kLayers;
  r.layer_values.assign(kLayers * wire::kLayerMetricCount, 0.5f);
  return r;
}

wire::Event warning_at(int64_t step, uint64_t seq) {
  wire::Event event;
  event.run = "warned";
  event.seq = seq;
  event.step = step;
  event.stamp_unix_ns = 1800000000000000000 + step;
  event.kind = wire::event_kind::kWarning;
  event.layer = "blocks.0.weight";
  event.detail = "update ratio / lr of blocks.0.weight 2.6x its baseline 0.031 and rising 4% a step: the run may "
                 "diverge in ~35 steps; lower the learning rate or lengthen the warmup";
  event.warning = wire::Warning{"update_ratio", 0.0806, 0.031, 0.04, 35, "lower the learning rate or lengthen the warmup"};
  return event;
}

// Sends the description and step 0 until `keel` shows the run (a PUB socket drops what it
// sends before the subscription), then steps 1..`last` with a warning after step `warned`;
// returns the next seq.
uint64_t publish_run(TestPublisher& probe, ChildProcess& keel, int64_t last, int64_t warned) {
  uint64_t seq = 1;
  for (int i = 0; keel.wait_for("keel: heatmap", 0.1).empty(); ++i) {
    EXPECT_LT(i, 300) << keel.output();
    if (i >= 300) return seq;
    wire::RunDescription again = warned_run();
    again.seq = seq++;
    probe.send(again);
    probe.send(record(0, seq++));
  }
  for (int64_t step = 1; step <= last; ++step) {
    probe.send(record(step, seq++));
    if (step == warned) probe.send(warning_at(step, seq++));
  }
  return seq;
}

struct Rect {
  float x0 = 0, y0 = 0, x1 = 0, y1 = 0;
};

// The last "keel: WHAT x0 .. y0 .. x1 .. y1 .." line of `output`.
bool parse_rect(const std::string& output, const std::string& what, Rect& r) {
  const size_t at = output.rfind("keel: " + what + " x0 ");
  return at != std::string::npos && std::sscanf(output.c_str() + at + 6 + what.size(), " x0 %f y0 %f x1 %f y1 %f",
                                                &r.x0, &r.y0, &r.x1, &r.y1) == 4;
}

class Screenshot {
 public:
  explicit Screenshot(const std::string& path) { pixels_ = stbi_load(path.c_str(), &width_, &height_, &channels_, 3); }
  ~Screenshot() {
    if (pixels_) stbi_image_free(pixels_);
  }
  bool loaded() const { return pixels_ != nullptr; }
  bool is(int x, int y, const int rgb[3]) const {
    const unsigned char* p = pixels_ + (size_t(y) * size_t(width_) + size_t(x)) * 3;
    return p[0] == rgb[0] && p[1] == rgb[1] && p[2] == rgb[2];
  }
  // Pixels of colour `rgb` in rows [y0, y1).
  int count(int y0, int y1, const int rgb[3]) const {
    int n = 0;
    for (int y = std::max(0, y0); y < std::min(height_, y1); ++y) {
      for (int x = 0; x < width_; ++x) n += is(x, y, rgb);
    }
    return n;
  }
  int height() const { return height_; }

 private:
  unsigned char* pixels_ = nullptr;
  int width_ = 0, height_ = 0, channels_ = 0;
};

// The banner in the screenshot: its background at both ends of its top margin (no text there),
// and the warning step's amber marker on the charts under it.
void expect_banner_and_marker(const std::string& png, const std::string& output) {
  Rect banner;
  ASSERT_TRUE(parse_rect(output, "warning banner", banner)) << output;
  Screenshot shot(png);
  ASSERT_TRUE(shot.loaded()) << "cannot read " << png;
  EXPECT_TRUE(shot.is(int(banner.x0) + 3, int(banner.y0) + 2, kBanner));
  EXPECT_TRUE(shot.is(int(banner.x1) - 3, int(banner.y0) + 2, kBanner));
  EXPECT_GT(shot.count(int(banner.y0), int(banner.y1), kBanner), 1000) << "the banner is a strip, not a line";
  EXPECT_GE(shot.count(int(banner.y1) + 1, shot.height(), kMarker), 20) << "no marker at the warning's step";
}

TEST(WarningGui, ALiveWarningShowsItsBannerMarksItsStepAndRunsTheAlertCommand) {
  TestPublisher probe(ServerAuth::kUsersOwnKey);
  const fs::path png = scratch("live.png"), alerts = scratch("alerts.jsonl");
  ChildProcess keel({KEEL_PATH, "--verbose", "--connect", probe.endpoint(), "--alert-command",
                     "cat >> '" + alerts.string() + "'", "--screenshot", png.string(), "--screenshot-after", "8"});
  publish_run(probe, keel, 200, 150);
  const std::string shown = keel.find_or_wait_for("keel: warning banner step 150:", 30);
  EXPECT_NE(shown.find("Warning at step 150: update_ratio of blocks.0.weight | 0.0806, 2.6x its baseline 0.031, "
                       "rising 4.08% a step; may diverge in ~35 steps | Advice: lower the learning rate or "
                       "lengthen the warmup"),
            std::string::npos)
      << keel.output();
  EXPECT_FALSE(keel.find_or_wait_for("keel: alert warning step 150 rank 0 run warned layer blocks.0.weight", 30).empty());
  std::string line;
  for (int i = 0; i < 300 && line.empty(); ++i, std::this_thread::sleep_for(std::chrono::milliseconds(50))) {
    std::ifstream in(alerts);
    std::getline(in, line);
  }
  EXPECT_NE(line.find("\"kind\":\"warning\""), std::string::npos) << line;
  EXPECT_NE(line.find("\"warning\":{\"signal\":\"update_ratio\""), std::string::npos) << line;
  ASSERT_FALSE(keel.find_or_wait_for("keel: screenshot", 90).empty()) << keel.output();
  EXPECT_EQ(keel.wait_exit(), 0);
  expect_banner_and_marker(png.string(), keel.output());
}

TEST(WarningGui, DismissHidesTheBannerUntilANewerWarningComes) {
  TestPublisher probe(ServerAuth::kUsersOwnKey);
  ChildProcess keel({KEEL_PATH, "--verbose", "--connect", probe.endpoint()});
  uint64_t seq = publish_run(probe, keel, 160, 150);
  ASSERT_FALSE(keel.find_or_wait_for("keel: warning banner step 150:", 30).empty()) << keel.output();
  ASSERT_FALSE(keel.find_or_wait_for("keel: control dismiss-warning", 30).empty()) << keel.output();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));   // the button's place settles
  Rect dismiss;
  ASSERT_TRUE(parse_rect(keel.output() + keel.wait_for("keel: control dismiss-warning", 0.5), "control dismiss-warning",
                         dismiss));
  const std::string window = run_command("xdotool search --sync --limit 1 --name '^keel$'");
  ASSERT_FALSE(window.empty());
  std::string clicked;
  // Focused and hovered before the press (control_gui_test.cpp says why); tried again when a
  // loaded machine lost the input.
  for (int attempt = 0; attempt < 4 && clicked.empty(); ++attempt) {
    run_command("xdotool windowfocus --sync " + window + " mousemove --window " + window + " 5 5 sleep 0.2 mousemove --window " +
                window + " " + std::to_string(int((dismiss.x0 + dismiss.x1) / 2)) + " " +
                std::to_string(int((dismiss.y0 + dismiss.y1) / 2)) + " sleep 0.3 click 1");
    clicked = keel.wait_for("keel: clicked Dismiss warning (step 150)", 5);
  }
  ASSERT_FALSE(clicked.empty()) << keel.output();
  // A newer warning shows again.
  for (int64_t step = 161; step <= 180; ++step) probe.send(record(step, seq++));
  probe.send(warning_at(180, seq++));
  EXPECT_FALSE(keel.wait_for("keel: warning banner step 180:", 30).empty()) << keel.output();
}

// A recording holding a warning, written here with the wire's RecordingWriter (no trainer).
void write_recording(const fs::path& path) {
  wire::RecordingWriterOptions options;
  if (!wire::recording_codec_available(options.codec)) options.codec = wire::recording::Codec::none;
  std::string error;
  auto writer = wire::RecordingWriter::create(path.string(), options, error);
  ASSERT_TRUE(writer) << error;
  const auto append = [&](wire::recording::FrameKind kind, int64_t step, const wire::Message& message) {
    const std::vector<char> payload = wire::encode(message);
    ASSERT_TRUE(writer->append(kind, step, payload.data(), payload.size())) << writer->error();
  };
  append(wire::recording::FrameKind::run, -1, warned_run());
  uint64_t seq = 2;
  for (int64_t step = 0; step <= 300; ++step) {
    append(wire::recording::FrameKind::step, step, record(step, seq++));
    if (step == 200) append(wire::recording::FrameKind::event, step, warning_at(step, seq++));
  }
  ASSERT_TRUE(writer->close()) << writer->error();
}

TEST(WarningGui, ARecordingOpensWithTheBannerOfItsWarning) {
  const fs::path recording = scratch("warned.keelrec"), png = scratch("opened.png");
  write_recording(recording);
  ChildProcess keel({KEEL_PATH, "--verbose", "--open", recording.string(), "--screenshot", png.string()});
  EXPECT_FALSE(keel.find_or_wait_for("keel: warning banner step 200: Warning at step 200: update_ratio of "
                                     "blocks.0.weight",
                                     60)
                   .empty())
      << keel.output();
  ASSERT_FALSE(keel.find_or_wait_for("keel: screenshot", 90).empty()) << keel.output();
  EXPECT_EQ(keel.wait_exit(), 0);
  expect_banner_and_marker(png.string(), keel.output());
}

}  // namespace
