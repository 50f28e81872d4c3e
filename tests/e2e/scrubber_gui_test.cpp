// A recording opened in a real X server (Xvfb), driven with real clicks and drags (xdotool):
// the run scrubber under the charts shows the whole run, its edge dragged zooms, a click beside
// its box goes there; Ctrl+O lists the working directory's recording and a click on it asks
// to open it. The recording is written here with the wire's RecordingWriter: no trainer runs.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "child_process.hpp"
#include "keel/wire/recording_writer.hpp"
#include "keel/wire/codec.hpp"
#include "wire_samples.hpp"

namespace {

namespace fs = std::filesystem;
using keel::e2e::ChildProcess;
using keel::e2e::run_command;

constexpr int kSteps = 3000;

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::path(testing::TempDir()) / ("keel-scrubber-gui-" + std::to_string(::getpid())) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// A run of kSteps steps on rank 0: the wire's sample description and records, made to agree
// (one run, three layers, finite values; the samples mix ranks and non-finite values on purpose).
void write_recording(const fs::path& path) {
  namespace wire = keel::wire;
  wire::RecordingWriterOptions options;
  if (!wire::recording_codec_available(options.codec)) options.codec = wire::recording::Codec::none;
  std::string error;
  auto writer = wire::RecordingWriter::create(path.string(), options, error);
  ASSERT_TRUE(writer) << error;
  wire::RunDescription run = wire::testing::sample_run();
  run.rank = 0;
  run.layers.resize(3);
  const std::vector<char> description = wire::encode(run);
  ASSERT_TRUE(writer->append(wire::recording::FrameKind::run, -1, description.data(), description.size()));
  wire::StepRecord record = wire::testing::sample_step(false);
  record.rank = 0;
  record.skipped = false;
  record.frozen_layers.clear();
  record.watches.clear();
  for (int s = 0; s < kSteps; ++s) {
    record.step = s;
    record.seq = uint64_t(s) + 1;
    record.loss = 3.0 / (1.0 + s);
    for (size_t i = 0; i < record.layer_values.size(); ++i) record.layer_values[i] = float(1.0 + 0.001 * s + 0.1 * double(i));
    const std::vector<char> payload = wire::encode(record);
    ASSERT_TRUE(writer->append(wire::recording::FrameKind::step, s, payload.data(), payload.size())) << writer->error();
  }
  ASSERT_TRUE(writer->close()) << writer->error();
}

struct Rect {
  float x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  int mid_y() const { return int((y0 + y1) / 2); }
};

// "keel: WHAT x0 .. y0 .. x1 .. y1 .." as the dashboard logs its controls.
bool parse_rect(const std::string& line, const std::string& what, Rect& r) {
  const size_t at = line.find(what + " x0 ");
  return at != std::string::npos &&
         std::sscanf(line.c_str() + at + what.size(), " x0 %f y0 %f x1 %f y1 %f", &r.x0, &r.y0, &r.x1, &r.y1) == 4;
}

struct View {
  double first = -1, last = -1;
};

bool parse_view(const std::string& line, View& v) {
  const size_t at = line.find("keel: scrubber view ");
  return at != std::string::npos && std::sscanf(line.c_str() + at, "keel: scrubber view %lf to %lf", &v.first, &v.last) == 2;
}

class ScrubberGui : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = scratch("run");
    fs::create_directories(dir_ / "keel-runs");
    write_recording(dir_ / "keel-runs" / "night.keelrec");
    // The Open dialog lists the working directory's keel-runs/, as a user's shell would have it.
    ASSERT_EQ(::chdir(dir_.c_str()), 0);
    keel_ = std::make_unique<ChildProcess>(std::vector<std::string>{KEEL_PATH, "--verbose", "--open", "keel-runs/night.keelrec"});
    const std::string opened = keel_->wait_for("keel: opened", 60);
    ASSERT_NE(opened.find("shown run steps 0 to 2999"), std::string::npos) << keel_->output();
    ASSERT_TRUE(parse_rect(keel_->find_or_wait_for("keel: scrubber x0", 30), "scrubber", strip_)) << keel_->output();
    ASSERT_TRUE(parse_rect(keel_->find_or_wait_for("keel: control whole_run", 30), "whole_run", whole_run_))
        << keel_->output();
    window_ = run_command("xdotool search --sync --limit 1 --name '^keel$'");
    ASSERT_FALSE(window_.empty());
  }

  // Runs xdotool commands on the window, focused and with the pointer in it first (as
  // gui_test.cpp explains: without a window manager nothing else gives it input), and waits
  // for the line `needle`; tried again when a loaded machine lost the input.
  std::string act(const std::string& commands, const std::string& needle) {
    for (int attempt = 0; attempt < 4; ++attempt) {
      run_command("xdotool windowfocus --sync " + window_ + " mousemove --window " + window_ + " 5 5 sleep 0.2 " +
                  commands);
      const std::string line = keel_->wait_for(needle, 5);
      if (!line.empty()) return line;
    }
    return "";
  }

  std::string move_to(float x, int y) {
    return "mousemove --window " + window_ + " " + std::to_string(int(x)) + " " + std::to_string(y) + " sleep 0.3 ";
  }

  View act_on_strip(const std::string& commands) {
    View view;
    EXPECT_TRUE(parse_view(act(commands, "keel: scrubber view"), view)) << keel_->output();
    return view;
  }

  double step_px() const { return kSteps / double(strip_.x1 - strip_.x0); }

  fs::path dir_;
  std::unique_ptr<ChildProcess> keel_;
  Rect strip_, whole_run_;
  std::string window_;
};

TEST_F(ScrubberGui, TheWholeRunButtonAnEdgeDraggedAndAClickBesideTheBoxMoveEveryPlotsView) {
  const View whole = act_on_strip(move_to((whole_run_.x0 + whole_run_.x1) / 2, whole_run_.mid_y()) + "click 1");
  EXPECT_EQ(whole.first, 0);
  EXPECT_EQ(whole.last, kSteps - 1);

  // The right edge, dragged to a quarter of the strip: the first step stays, the last follows.
  const float quarter = strip_.x0 + (strip_.x1 - strip_.x0) * 0.25f;
  const View zoomed = act_on_strip(move_to(strip_.x1 - 2, strip_.mid_y()) + "mousedown 1 sleep 0.2 " +
                                   move_to((strip_.x1 + quarter) / 2, strip_.mid_y()) + move_to(quarter, strip_.mid_y()) +
                                   "mouseup 1");
  EXPECT_EQ(zoomed.first, 0);
  EXPECT_NEAR(zoomed.last, kSteps * 0.25, 8 * step_px()) << keel_->output();

  // A click beside the box, at 80% of the strip: the view is centred there, its span kept.
  const View moved = act_on_strip(move_to(strip_.x0 + (strip_.x1 - strip_.x0) * 0.8f, strip_.mid_y()) + "click 1");
  EXPECT_NEAR((moved.first + moved.last) / 2, kSteps * 0.8, 8 * step_px()) << keel_->output();
  EXPECT_NEAR(moved.last - moved.first, zoomed.last - zoomed.first, 1.0);
}

TEST_F(ScrubberGui, CtrlOListsTheWorkingDirectorysRecordingAndAClickAsksToOpenIt) {
  Rect entry;
  const std::string listed = act("key --delay 100 ctrl+o", "keel: open dialog entry 0 ");
  ASSERT_TRUE(parse_rect(listed, "keel-runs/night.keelrec", entry)) << keel_->output();
  // The first frame of a popup may place it before its size is known: the last line logged wins.
  const std::string settled = keel_->wait_for("keel: open dialog entry 0 ", 1);
  if (!settled.empty()) {
    ASSERT_TRUE(parse_rect(settled, "keel-runs/night.keelrec", entry));
  }
  const std::string requested =
      act(move_to((entry.x0 + entry.x1) / 2, entry.mid_y()) + "click 1", "keel: open requested");
  EXPECT_NE(requested.find("keel: open requested keel-runs/night.keelrec"), std::string::npos) << keel_->output();
}

}  // namespace
