// Two probes in one process (keel-demo-gan: a discriminator and a generator, both rank 0 of 1,
// on two endpoints) seen by one real dashboard in a real X window (Xvfb). Each run is shown
// under its own model name and layer names with its own loss at the step shown (never one
// model's numbers under the other's names, as when runs were keyed by rank), a real click on
// the run picker switches between them, the discriminator's BatchNorm buffer that a poisoned
// batch made Inf is reported by name at its step, and the loss chart overlays the other
// model's loss. Run under xvfb-run (see CMakeLists.txt).
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "child_process.hpp"

#define STB_IMAGE_IMPLEMENTATION
#include <stb_image.h>

namespace {

using keel::e2e::ChildProcess;
using keel::e2e::run_command;

constexpr int kPoisonedStep = 30;

// What a model's run must be shown with: its own layers (keel-demo-gan's modules).
struct ModelLayers {
  const char* model;
  int layers;
  const char* first;
  const char* last;
};
constexpr ModelLayers kDiscriminator{"discriminator", 8, "fc1.weight", "score.bias"};
constexpr ModelLayers kGenerator{"generator", 6, "project.weight", "out.bias"};

// "keel: shown LABEL: layers N first A last B step S loss L" (Dashboard::log_shown_run).
struct Shown {
  std::string label, first, last;
  int layers = -1;
  long long step = -1;
  double loss = 0;
};

bool parse_shown(const std::string& line, Shown& shown) {
  const size_t at = line.find("keel: shown ");
  const size_t colon = line.find(": layers ", at);
  if (at == std::string::npos || colon == std::string::npos) return false;
  shown.label = line.substr(at + 12, colon - at - 12);
  char first[256] = {}, last[256] = {};
  if (std::sscanf(line.c_str() + colon, ": layers %d first %255s last %255s step %lld loss %lf", &shown.layers, first,
                  last, &shown.step, &shown.loss) != 5) {
    return false;
  }
  shown.first = first;
  shown.last = last;
  return true;
}

// The next "keel: shown" line of `model` that has a step (the run's records have arrived).
Shown wait_shown(ChildProcess& keel, const std::string& model) {
  Shown shown;
  for (int tries = 0; tries < 20; ++tries) {
    const std::string line = keel.wait_for("keel: shown " + model, 60);
    if (line.empty() || !parse_shown(line, shown)) break;
    if (shown.step >= 0) return shown;
  }
  ADD_FAILURE() << "no step of " << model << " shown:\n" << keel.output();
  return shown;
}

class ModelsGuiTest : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    discriminator_ = "tcp://127.0.0.1:" + std::to_string(keel::e2e::free_port_pair());
    generator_ = "tcp://127.0.0.1:" + std::to_string(keel::e2e::free_port_pair());
    const std::string dumps = testing::TempDir() + "keel_models_gui_dumps";
    run_command("rm -rf '" + dumps + "'");
    gan_ = new ChildProcess({KEEL_DEMO_GAN_PATH, "--steps", "0", "--pace", "20", "--log-every", "1", "--poison-batch",
                             std::to_string(kPoisonedStep), "--discriminator-endpoint", discriminator_,
                             "--generator-endpoint", generator_, "--dump-dir", dumps},
                            keel::e2e::kBackgroundNiceness);
  }
  static void TearDownTestSuite() {
    delete gan_;
    gan_ = nullptr;
  }
  static std::vector<std::string> connect_both() {
    return {KEEL_PATH, "--verbose", "--connect", discriminator_, "--connect", generator_};
  }
  // The run shown is that model's: its layer names, and its own loss at the step shown, as
  // the trainer printed it ("step S discriminator loss X generator loss Y").
  static void expect_own_run(const Shown& shown, const ModelLayers& model) {
    EXPECT_EQ(shown.label.rfind(std::string(model.model) + " (", 0), 0u) << shown.label;
    EXPECT_EQ(shown.layers, model.layers) << shown.label;
    EXPECT_EQ(shown.first, model.first) << shown.label;
    EXPECT_EQ(shown.last, model.last) << shown.label;
    const std::string logged = gan_->find_or_wait_for("step " + std::to_string(shown.step) + " discriminator loss ", 30);
    double losses[2] = {0, 0};
    ASSERT_EQ(std::sscanf(logged.c_str(), "step %*d discriminator loss %lf generator loss %lf", &losses[0], &losses[1]), 2)
        << logged;
    const bool discriminator = std::string(model.model) == kDiscriminator.model;
    const double own = losses[discriminator ? 0 : 1];
    const double other = losses[discriminator ? 1 : 0];
    EXPECT_NEAR(shown.loss, own, 1e-6 * std::fabs(own)) << shown.label << " at step " << shown.step;
    EXPECT_GT(std::fabs(shown.loss - other), 1e-6) << "the other model's loss shown under " << shown.label;
  }
  static std::string discriminator_, generator_;
  static ChildProcess* gan_;
};
std::string ModelsGuiTest::discriminator_, ModelsGuiTest::generator_;
ChildProcess* ModelsGuiTest::gan_ = nullptr;

TEST_F(ModelsGuiTest, EachModelIsShownUnderItsOwnNamesWithTheOtherLossOverlaid) {
  // The poisoned batch has happened before the app starts; it shows it from its backfill.
  ASSERT_FALSE(gan_->wait_for("discriminator event nonfinite_buffer bn1.running_var", 120).empty()) << gan_->output();
  const std::string png = testing::TempDir() + "keel_models_gui_test.png";
  std::remove(png.c_str());
  std::vector<std::string> argv = connect_both();
  for (const char* arg : {"--screenshot", png.c_str(), "--screenshot-after", "10"}) argv.push_back(arg);
  ChildProcess keel(argv);
  // The first run described is shown; which one that is depends on which answered first.
  Shown shown = wait_shown(keel, "");
  const bool discriminator_first = shown.label.rfind("discriminator", 0) == 0;
  expect_own_run(shown, discriminator_first ? kDiscriminator : kGenerator);
  ASSERT_FALSE(keel.find_or_wait_for("keel: control run ", 30).empty()) << "no run picker:\n" << keel.output();
  ASSERT_FALSE(keel.find_or_wait_for("keel: screenshot", 60).empty()) << keel.output();
  EXPECT_EQ(keel.wait_exit(), 0);

  // The other model's loss line and legend, in the first overlay colour (global_charts.cpp).
  int width = 0, height = 0, channels = 0;
  unsigned char* pixels = stbi_load(png.c_str(), &width, &height, &channels, 3);
  ASSERT_NE(pixels, nullptr) << "cannot read " << png;
  int overlay = 0;
  for (int i = 0; i < width * height; ++i) {
    const unsigned char* p = pixels + size_t(i) * 3;
    overlay += std::abs(p[0] - 110) <= 2 && std::abs(p[1] - 230) <= 2 && std::abs(p[2] - 230) <= 2;
  }
  stbi_image_free(pixels);
  EXPECT_GT(overlay, 20) << "the other model's loss is not overlaid: " << png;
}

TEST_F(ModelsGuiTest, AClickOnTheRunPickerShowsTheOtherModelAndItsBufferEvent) {
  ChildProcess keel(connect_both());
  const Shown first = wait_shown(keel, "");
  const bool discriminator_first = first.label.rfind("discriminator", 0) == 0;
  const ModelLayers& other = discriminator_first ? kGenerator : kDiscriminator;
  const std::string window = run_command("xdotool search --sync --limit 1 --name '^keel$'");
  ASSERT_FALSE(window.empty());
  // Focused first and retried, as in gui_test.cpp: without a window manager nothing focuses a
  // new window, and ImGui's GLFW backend reads the pointer only when it is focused.
  // Clicks the middle of the control whose geometry line starts "keel: control CONTROL" (the
  // newest such line) until a line with `then` follows.
  auto click = [&](const std::string& control, const std::string& then) {
    std::string seen;
    for (int attempt = 0; attempt < 4 && seen.empty(); ++attempt) {
      std::string output = keel.output();
      size_t at = output.rfind("keel: control " + control);
      if (at == std::string::npos) {
        keel.wait_for("keel: control " + control, 10);
        output = keel.output();
        at = output.rfind("keel: control " + control);
        if (at == std::string::npos) continue;
      }
      const size_t rect = output.find(" x0 ", at);
      float x0 = 0, y0 = 0, x1 = 0, y1 = 0;
      if (rect == std::string::npos ||
          std::sscanf(output.c_str() + rect, " x0 %f y0 %f x1 %f y1 %f", &x0, &y0, &x1, &y1) != 4) {
        break;
      }
      run_command("xdotool windowfocus --sync " + window + " mousemove --window " + window + " " + std::to_string(int((x0 + x1) / 2)) + " " +
                  std::to_string(int((y0 + y1) / 2)) + " sleep 0.5 mousedown 1 sleep 0.2 mouseup 1");
      seen = keel.wait_for(then, 5);
    }
    return seen;
  };
  ASSERT_FALSE(keel.find_or_wait_for(std::string("keel: control run ") + other.model, 30).empty()) << keel.output();
  ASSERT_FALSE(click(std::string("run ") + other.model, std::string("keel: showing run ")).empty())
      << "the other run was not picked:\n" << keel.output();
  expect_own_run(wait_shown(keel, other.model), other);
  // The discriminator's events: its buffer, by name, at the poisoned step.
  const std::string event = keel.find_or_wait_for("keel: event nonfinite_buffer", 30);
  EXPECT_NE(event.find("step " + std::to_string(kPoisonedStep) + " layer bn1.running_var run discriminator ("),
            std::string::npos)
      << keel.output();
}

}  // namespace
