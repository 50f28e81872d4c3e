// The morning after, in a real X server: a keel-demo run nobody watched, whose NaN was born at
// step 2,000, opened from its recording with `keel --open`. The whole run is there, the
// dashboard goes to the unsafe step with its layer selected and its cause shown, and the
// screenshot holds the non-finite cells. Two runs opened together are overlaid. A file that is
// no recording is refused in words. A dashboard attached late to a live run reads the rest of
// it from the run's recording when the status bar's offer is clicked.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "child_process.hpp"
#include "heatmap_geometry.hpp"

#define STB_IMAGE_IMPLEMENTATION
#include <stb_image.h>

namespace {

namespace fs = std::filesystem;
using keel::e2e::ChildProcess;
using keel::e2e::HeatmapGeometry;
using keel::e2e::parse_geometry;

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::path(testing::TempDir()) / ("keel-open-gui-" + std::to_string(::getpid())) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(OpenGui, ARunNobodyWatchedOpensWholeOnItsFirstNonFiniteStepWithItsCause) {
  const fs::path dir = scratch("night");
  {
    // The night: no dashboard, no socket, only the recording. A narrow model on one thread
    // (the same 42 layers and names, 5 s instead of a minute for 2,100 steps).
    ChildProcess demo({KEEL_DEMO_PATH, "--steps", "2100", "--endpoint", "", "--log-every", "0", "--cause",
                       "attention:2000", "--record-dir", (dir / "runs").string(), "--dump-dir",
                       (dir / "dumps").string(), "--batch", "2", "--context", "32", "--width", "32",
                       "--threads", "1"});
    ASSERT_EQ(demo.wait_exit(), 0) << demo.output();
  }
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir / "runs")) files.push_back(entry.path());
  ASSERT_EQ(files.size(), 1u);

  // The morning.
  const std::string png = (dir / "open.png").string();
  ChildProcess keel({KEEL_PATH, "--verbose", "--open", files[0].string(), "--screenshot", png});
  const std::string opened = keel.wait_for("keel: opened", 120);
  EXPECT_NE(opened.find("shown run steps 0 to 2099"), std::string::npos) << keel.output();
  EXPECT_NE(opened.find(", 0 problems"), std::string::npos) << opened;
  ASSERT_FALSE(keel.find_or_wait_for("keel: screenshot", 120).empty()) << keel.output();
  // While the file loads, earlier events (the narrow model's grad-norm spikes) may be
  // selected first; the selection the screenshot shows is the last one made.
  const std::string output = keel.output();
  const size_t selected_at = output.rfind("keel: selected layer");
  ASSERT_NE(selected_at, std::string::npos) << output;
  EXPECT_EQ(output.substr(selected_at, output.find('\n', selected_at) - selected_at),
            "keel: selected layer blocks.1.attn.qkv.weight step 2000")
      << output;
  EXPECT_NE(output.find("keel: cause forward module blocks.1.attn.qkv step 2000: "), std::string::npos)
      << output;
  EXPECT_EQ(keel.wait_exit(), 0) << keel.output();

  int width = 0, height = 0, channels = 0;
  unsigned char* pixels = stbi_load(png.c_str(), &width, &height, &channels, 3);
  ASSERT_NE(pixels, nullptr) << "cannot read " << png;
  // The unsafe step is in view: the heatmap's non-finite colour (255, 32, 64) is on screen.
  int nonfinite = 0;
  for (int i = 0; i < width * height; ++i) {
    const unsigned char* p = pixels + size_t(i) * 3;
    nonfinite += p[0] == 0xFF && p[1] == 0x20 && p[2] == 0x40;
  }
  stbi_image_free(pixels);
  EXPECT_GT(nonfinite, 20) << "no non-finite cell in view: " << png;
}

// Yesterday's run (its learning rate blown up at step 200) and today's, opened together: the
// other run's colour (the first of the overlay colours, 110, 230, 230) traces its loss in the
// left chart and its grad norm in the right one, above the heatmap.
TEST(OpenGui, TwoRunsOpenedTogetherAreOverlaidInTheLossAndGradNormCharts) {
  const fs::path dir = scratch("two");
  for (const char* day : {"yesterday", "today"}) {
    std::vector<std::string> argv = {KEEL_DEMO_PATH, "--steps", "300", "--endpoint", "", "--log-every", "0",
                                     "--record-dir", (dir / day).string(), "--dump-dir", (dir / "dumps").string(),
                                     "--batch", "2", "--context", "32", "--width", "32", "--threads", "1"};
    if (std::string(day) == "yesterday") argv.insert(argv.end(), {"--cause", "lr:200"});
    ChildProcess demo(argv);
    ASSERT_EQ(demo.wait_exit(), 0) << demo.output();
  }
  // Today's run is shown and yesterday's overlaid: its blow-up stands out in the overlay's
  // colour. (The other way round, today's loss lies flat along the foot of a chart scaled to
  // yesterday's, under yesterday's own line where the two runs agree.)
  std::vector<std::string> argv = {KEEL_PATH, "--verbose", "--screenshot", (dir / "two.png").string()};
  for (const char* day : {"today", "yesterday"}) {
    for (const auto& entry : fs::directory_iterator(dir / day)) {
      argv.push_back("--open");
      argv.push_back(entry.path().string());
    }
  }
  ASSERT_EQ(argv.size(), 8u);
  ChildProcess keel(argv);
  HeatmapGeometry g;
  ASSERT_TRUE(parse_geometry(keel.wait_for("keel: heatmap", 120), g)) << keel.output();
  ASSERT_FALSE(keel.find_or_wait_for("keel: screenshot", 120).empty()) << keel.output();
  EXPECT_EQ(keel.wait_exit(), 0) << keel.output();

  int width = 0, height = 0, channels = 0;
  unsigned char* pixels = stbi_load((dir / "two.png").c_str(), &width, &height, &channels, 3);
  ASSERT_NE(pixels, nullptr);
  const auto other_run_pixels = [&](int x_begin, int x_end) {
    int count = 0;
    for (int y = 0; y < int(g.y0) && y < height; ++y) {
      for (int x = x_begin; x < x_end && x < width; ++x) {
        const unsigned char* p = pixels + (size_t(y) * size_t(width) + size_t(x)) * 3;
        count += p[0] == 110 && p[1] == 230 && p[2] == 230;
      }
    }
    return count;
  };
  const int middle = int((g.x0 + g.x1) / 2);
  const int in_loss = other_run_pixels(0, middle);
  const int in_grad_norm = other_run_pixels(middle, int(g.x1));
  stbi_image_free(pixels);
  EXPECT_GT(in_loss, 50) << "the other run's loss is not drawn";
  EXPECT_GT(in_grad_norm, 50) << "the other run's grad norm is not drawn";
}

// The probe keeps 64 steps for a late dashboard; the run is at step 200 and more when the
// dashboard attaches. Clicked, the status bar's offer reads the run's own recording: the run
// then holds every step from 0, and it is still the live run (one run, newer steps coming).
TEST(OpenGui, ALateDashboardReadsTheRestOfALiveRunFromItsRecording) {
  const fs::path dir = scratch("late");
  const int port = keel::e2e::free_port_pair();
  ASSERT_GT(port, 0);
  const std::string endpoint = "tcp://127.0.0.1:" + std::to_string(port);
  ChildProcess demo({KEEL_DEMO_PATH, "--steps", "0", "--pace", "40", "--history", "64", "--endpoint", endpoint,
                     "--log-every", "100", "--record-dir", (dir / "runs").string(), "--dump-dir",
                     (dir / "dumps").string(), "--batch", "2", "--context", "32", "--width", "32", "--threads", "1"},
                    keel::e2e::kBackgroundNiceness);
  ASSERT_FALSE(demo.wait_for("step    200", 60).empty()) << demo.output();

  ChildProcess keel({KEEL_PATH, "--verbose", "--connect", endpoint});
  const std::string offer = keel.wait_for("keel: offer recording", 60);
  float x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  ASSERT_EQ(std::sscanf(offer.c_str() + offer.find("keel: offer"), "keel: offer recording x0 %f y0 %f x1 %f y1 %f",
                        &x0, &y0, &x1, &y1), 4)
      << keel.output();
  const std::string window = keel::e2e::run_command("xdotool search --sync --limit 1 --name '^keel$'");
  ASSERT_FALSE(window.empty());
  // As the control test clicks: focus, move, click a moment later; again if unseen.
  std::string requested;
  for (int attempt = 0; attempt < 4 && requested.empty(); ++attempt) {
    keel::e2e::run_command("xdotool windowfocus --sync " + window + " mousemove --window " + window + " " +
                           std::to_string(int((x0 + x1) / 2)) + " " + std::to_string(int((y0 + y1) / 2)) +
                           " sleep 0.3 click 1");
    requested = keel.wait_for("keel: open requested", 5);
  }
  ASSERT_FALSE(requested.empty()) << keel.output();
  EXPECT_NE(requested.find((dir / "runs").string()), std::string::npos) << requested;

  const std::string opened = keel.wait_for("keel: opened", 60);
  long long first = -1, last = -1;
  ASSERT_EQ(std::sscanf(opened.c_str() + opened.find("shown run steps"), "shown run steps %lld to %lld", &first, &last),
            2)
      << keel.output();
  EXPECT_EQ(first, 0) << opened;
  EXPECT_GE(last, 200) << opened;
  EXPECT_EQ(keel.output().find("keel: shown", keel.output().find("keel: opened")), std::string::npos)
      << "the shown run changed: the recording's run is not the live one\n" << keel.output();
}

TEST(OpenGui, AFileThatIsNoRecordingIsRefusedInWords) {
  const fs::path dir = scratch("notes");
  const fs::path notes = dir / "notes.txt";
  { std::FILE* f = std::fopen(notes.c_str(), "w"); std::fputs("not a run", f); std::fclose(f); }
  ChildProcess keel({KEEL_PATH, "--open", notes.string(), "--screenshot", (dir / "refused.png").string()});
  EXPECT_EQ(keel.wait_exit(), 2);
  keel.wait_for("no such line", 1);
  EXPECT_NE(keel.output().find("neither a keel recording nor a dump's telemetry"), std::string::npos)
      << keel.output();
  EXPECT_TRUE(fs::exists(dir / "refused.png"));
}

}  // namespace
